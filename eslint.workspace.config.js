// ESLint over the whole workspace at once (`pnpm lint` at the root; the test command): the rules of
// eslint.config.js, with the type information of one program, the root tsconfig.json, instead of
// one program per package's tsconfig.json (the project service, for `eslint .` in a package and
// for editors). 25 s instead of 80 s for the 17 packages on 2 cores.
import config from './eslint.config.js';

const workspaceConfig = config.map((entry) =>
  !entry.languageOptions?.parserOptions?.projectService
    ? entry
    : {
        ...entry,
        languageOptions: {
          ...entry.languageOptions,
          parserOptions: { project: ['./tsconfig.json'], tsconfigRootDir: import.meta.dirname },
        },
      },
);

// ESLint looks for a default export.
// eslint-disable-next-line no-restricted-syntax
export default workspaceConfig;
