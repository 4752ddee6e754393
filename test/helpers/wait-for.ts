/**
 * Waiting for an event the test cannot subscribe to (a line in a process's
 * output, a row in a table) instead of sleeping a guessed time: polls
 * `condition` until it holds, and fails with `what` after `timeoutMs`.
 */
export async function waitFor<T>(
  condition: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  timeoutMs = 10_000,
  intervalMs = 20,
): Promise<T> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const value = await condition()
    if (value !== undefined && value !== false) return value
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
