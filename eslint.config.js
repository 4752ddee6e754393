// One lint configuration for every package: the recommended JavaScript and
// type-aware TypeScript rules, so promise misuse is caught before review.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  // examples/openapi.d.ts is generated (npm run openapi).
  { ignores: ['**/dist/**', '**/node_modules/**', '.data/**', '.tap/**', 'test-output/**', 'examples/openapi.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    // Functions a reader can hold in one sitting.
    files: ['*/src/**/*.ts', 'scripts/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80 }] },
  },
  {
    // tap's t.test() returns a promise that tap itself tracks.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-floating-promises': 'off' },
  },
)
