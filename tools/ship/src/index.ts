export { attw, packAll, privatePackages, publicPackages, publint, REPO_ROOT, type CheckResult, type PackedPackage, type PublicPackage } from './pack.ts';
export {
  MINI_PLUGIN,
  npmInstall,
  npmPack,
  runConformance,
  runInstalledBerth,
  writeConsumer,
  writePlugin,
  type BerthRun,
  type ConsumerReport,
} from './consumer.ts';
