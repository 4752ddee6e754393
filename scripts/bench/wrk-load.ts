/**
 * load.ts's timed closed loop, sent by wrk (wrk.ts): a warm-up run first when
 * one is asked for, then one slice of `seconds` after a lead-in in which the
 * connections open (so the handshakes are not timed, as the Node client's
 * untimed first request per connection).
 */
import type { LoadHooks, LoadResult, LoadSpec } from './load-client.js'
import type { Wrk } from './wrk.js'
import { monotonicMs, runWrk } from './wrk.js'
import type { WrkResult } from './wrk-result.js'
import { wrkLatency, wrkStatuses } from './wrk-result.js'

/** Before slice 0: time for the connections (and their TLS handshakes) to open. */
export const LEAD_MS = 1_000

/** A closed loop for a time with the same headers on every request: what wrk's static request can send. */
export function wrkCanSend(spec: LoadSpec): boolean {
  return spec.seconds !== undefined && spec.keys === undefined && spec.unknownKeys === undefined && spec.randomForwardedFor !== true
}

/** load.ts's result from a run of one slice. */
export function loadResult(result: WrkResult): LoadResult {
  const requests = result.slices[0]?.answers ?? 0
  const seconds = (result.slices[0]?.ms ?? 0) / 1000
  return {
    requests,
    seconds,
    perSecond: seconds === 0 ? 0 : requests / seconds,
    statuses: wrkStatuses(result),
    ...wrkLatency(result),
    generatorCpuUsPerRequest: requests === 0 ? 0 : result.cpuUs / requests,
  }
}

export async function wrkLoad(wrk: Wrk, spec: LoadSpec, hooks: LoadHooks = {}): Promise<LoadResult> {
  const run = { url: spec.url, headers: spec.headers, connections: spec.connections, own: [0] }
  if (spec.warmUpSeconds !== undefined) await runWrk(wrk, { ...run, start: monotonicMs() + LEAD_MS, sliceMs: spec.warmUpSeconds * 1000 })
  return loadResult(await runWrk(wrk, { ...run, start: monotonicMs() + LEAD_MS, sliceMs: (spec.seconds ?? 1) * 1000 }, hooks))
}
