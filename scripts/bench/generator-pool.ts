/**
 * What both load generators (load.ts, side-by-side-load.ts) send through:
 * `connections` keep-alive connections to one target (http1-connection.ts),
 * each a closed loop (no pipelining), kept open across the whole run.
 */
import { Http1Connection } from './http1-connection.js'

export function generatorPool(url: URL, connections: number): Http1Connection[] {
  return Array.from({ length: connections }, () => new Http1Connection(url))
}

/** A line of JSON on stdout: the generators' events for runGenerator (load-client.ts). */
export function emit(message: object): void {
  process.stdout.write(`${JSON.stringify(message)}\n`)
}
