#!/usr/bin/env node
// berth-check-deps [root]: prints every import that breaks the layering or is undeclared; exit 1 if any.
import path from 'node:path';
import { checkWorkspace, formatViolations, readWorkspace } from './check.ts';

const root = path.resolve(process.argv[2] ?? path.join(import.meta.dirname, '../../..'));
if (process.argv.includes('--help')) {
  console.log('usage: berth-check-deps [workspace-root]\n\nChecks that packages import only what ARCHITECTURE.md allows and what their package.json declares.');
  process.exit(0);
}
const packages = readWorkspace(root);
const violations = checkWorkspace(root, packages);
if (violations.length > 0) {
  console.error(`dependency check: ${violations.length} violation(s) in ${packages.length} packages\n${formatViolations(violations)}`);
  process.exit(1);
}
console.log(`dependency check: ${packages.length} packages, no violations`);
