'use strict';
// ESLint's recommended rules plus a few that keep the code base consistent;
// `npm run lint` runs it, and scripts/test.sh runs it in CI.
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  {
    ignores: ['node_modules/**', '.nodes/**', '.build/**', 'build/**', 'prebuilds/**', 'bench-results/**',
      'fuzz/corpus/**', '.toolchain/**', '.bench-deps/**', 'test/types/**'],
  },
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: 'commonjs',
      globals: { ...globals.node },
    },
    rules: {
      'no-unused-vars': ['error', { args: 'none', caughtErrors: 'none' }],
      'no-empty': ['error', { allowEmptyCatch: true }],
      'no-var': 'error',
      'prefer-const': ['error', { destructuring: 'all' }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    // register-detected.js is an ES module in a .js file on purpose: Node
    // detects its syntax (test/register.test.js).
    files: ['**/*.mjs', 'test/fixtures/register-detected.js'],
    languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: { ...globals.node } },
  },
];
