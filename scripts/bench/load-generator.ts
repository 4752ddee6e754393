/**
 * Which load generator the benchmark drives its targets with: wrk when it is
 * installed (`apt-get install -y wrk`), since it costs the machine a few µs
 * per request where a Node client costs 20–30 (and a generator that costs as
 * much as its targets presses every ratio towards 1), else the benchmark's
 * own Node client (http1-connection.ts). BENCH_GENERATOR=wrk or =node
 * chooses; wrk chosen and not installed stops the benchmark. The flood and
 * the cold paths send a different key with each request, which wrk's
 * static request cannot, and always use the Node client.
 */
import { spawnSync } from 'node:child_process'
import type { Wrk } from './wrk.js'
import { findExecutable } from './processes.js'

export interface LoadGenerator {
  name: 'wrk' | 'node'
  /** When the name is wrk. */
  wrk: Wrk | null
  /** For the report: what sent the load. */
  description: string
}

export const NODE_CLIENT = "the benchmark's own HTTP/1.1 client in Node (scripts/bench/http1-connection.ts)"

/** wrk on PATH, with its version, or null. */
export function findWrk(): Wrk | null {
  const binary = findExecutable('wrk')
  if (binary === null) return null
  // `wrk -v` prints its version, then its usage, and exits 1.
  const printed = spawnSync(binary, ['-v'], { encoding: 'utf8' }).stdout
  return { binary, version: /^wrk (\S+)/.exec(printed)?.[1] ?? 'unknown' }
}

/** The generator `BENCH_GENERATOR` asks for (wrk when it is installed, by default), given where wrk is. */
export function chooseGenerator(asked: string | undefined, wrk: Wrk | null): LoadGenerator {
  const name = asked?.trim() || (wrk === null ? 'node' : 'wrk')
  if (name === 'node') return { name, wrk: null, description: NODE_CLIENT }
  if (name !== 'wrk') throw new Error(`BENCH_GENERATOR must be wrk or node, got ${JSON.stringify(asked)}`)
  if (wrk === null) throw new Error('BENCH_GENERATOR=wrk, but wrk is not installed (apt-get install -y wrk)')
  return { name, wrk, description: `wrk ${wrk.version}, one thread` }
}

let chosen: LoadGenerator | undefined

/** The run's generator, chosen once. */
export function loadGenerator(): LoadGenerator {
  chosen ??= chooseGenerator(process.env['BENCH_GENERATOR'], findWrk())
  return chosen
}
