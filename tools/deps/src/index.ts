/**
 * The dependency-boundary check: every workspace package's imports follow the layering of
 * ARCHITECTURE.md and name only packages the package declares.
 */
export { checkWorkspace, readWorkspace, importsOf, isTestFile, packageOf, formatViolations, type Violation, type WorkspacePackage } from './check.ts';
export { roleOf, layeringViolation, type Role } from './layers.ts';
