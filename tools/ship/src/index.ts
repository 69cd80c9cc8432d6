export { attw, packAll, publicPackages, publint, REPO_ROOT, type CheckResult, type PackedPackage, type PublicPackage } from './pack.ts';
export { MINI_PLUGIN, npmInstall, runConformance, writeConsumer, type ConsumerReport } from './consumer.ts';
