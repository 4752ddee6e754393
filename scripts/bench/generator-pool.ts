/**
 * What both load generators (load.ts, side-by-side-load.ts) send through: one
 * undici pool per target origin, a closed loop per connection (no
 * pipelining), connections kept open across the whole run, the benchmark's
 * self-signed certificate accepted. One pool per origin also means no
 * per-request URL parsing or dispatcher lookup, so the generator stays cheap.
 */
import { Pool } from 'undici'

export function generatorPool(origin: string, connections: number): Pool {
  return new Pool(origin, {
    connections,
    pipelining: 1,
    keepAliveTimeout: 120_000,
    keepAliveMaxTimeout: 120_000,
    connect: { rejectUnauthorized: false },
  })
}

/** The path with query of a target URL, as the pool sends it. */
export function pathOf(url: URL): string {
  return `${url.pathname}${url.search}`
}

/** A line of JSON on stdout: the generators' events for runGenerator (load-client.ts). */
export function emit(message: object): void {
  process.stdout.write(`${JSON.stringify(message)}\n`)
}
