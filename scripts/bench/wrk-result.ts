/**
 * What a run of wrk with scripts/bench/wrk.lua yields (wrk.ts runs it): the
 * script's result line, read, and turned into the benchmark's figures.
 */
import type { Latency } from './stats.js'

export interface WrkSlice {
  index: number
  answers: number
  /** From the slice's start to its last answer (at least the slice's length). */
  ms: number
}

export interface WrkResult {
  requests: number
  errors: { connect: number; read: number; write: number; status: number; timeout: number }
  latencyUs: { p50: number; p99: number; p999: number; max: number }
  /** CPU wrk spent from its first answer in a timed slice on (not its start, nor the handshakes). */
  cpuUs: number
  slices: WrkSlice[]
}

const RESULT_PREFIX = 'WRK-RESULT '

/** The script's result line in wrk's output. */
export function parseWrkOutput(stdout: string): WrkResult {
  const line = stdout.split('\n').find((text) => text.startsWith(RESULT_PREFIX))
  if (line === undefined) throw new Error(`wrk printed no result: ${stdout.slice(-2000)}`)
  return JSON.parse(line.slice(RESULT_PREFIX.length)) as WrkResult
}

/**
 * Answers by status as far as wrk tells them: it counts answers of 400 or
 * more (`4xx-5xx`), not each status, so the rest are `2xx-3xx`; requests that
 * got no answer (a connection refused, reset or timed out) are `error`.
 */
export function wrkStatuses(result: WrkResult): Record<string, number> {
  const { connect, read, write, timeout, status } = result.errors
  const statuses: Record<string, number> = { '2xx-3xx': result.requests - status }
  if (status > 0) statuses['4xx-5xx'] = status
  if (connect + read + write + timeout > 0) statuses['error'] = connect + read + write + timeout
  return statuses
}

export function wrkLatency(result: WrkResult): Latency {
  const { p50, p99, p999, max } = result.latencyUs
  return { p50Ms: p50 / 1000, p99Ms: p99 / 1000, p999Ms: p999 / 1000, maxMs: max / 1000 }
}
