/**
 * Every wait on a dependency has a deadline (Redis, Postgres, a lease, a
 * lookup): one helper for all of them, so that each one clears its timer
 * when the work settles and none keeps the process alive.
 */

/** Settles as `promise` does, or rejects with "<what> took longer than <ms> ms" once `ms` have passed. */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)
    timer.unref()
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}
