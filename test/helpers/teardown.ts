/**
 * What the helpers need of a tap test: a place to register clean-up. Any tap
 * `Test` satisfies it, and so does a plain collector (scripts/ use one).
 */
export interface Teardown {
  teardown(fn: () => unknown): void
}
