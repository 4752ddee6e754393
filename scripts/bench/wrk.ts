/**
 * wrk (Debian's package) as the load generator: a process of its own, one
 * thread, its connections opened during a lead-in and its requests sent
 * only within the slices of time it is given (scripts/bench/wrk.lua decides,
 * before every request, whether it may leave). wrk runs for whole seconds;
 * the orchestrator ends it with SIGINT once its last slice is over (wrk then
 * stops, prints its report and calls the script's done()). Its result: the
 * answers and the time of each slice, wrk's own totals and error counts, the
 * latency percentiles of its histogram (which wrk corrects for coordinated
 * omission: a request that took more than twice the mean time per request
 * of a connection adds the samples a constant-rate client would have seen)
 * and the CPU it spent.
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { projectRoot } from '../../test/helpers/processes.js'
import type { LoadHooks } from './load-client.js'
import { track } from './processes.js'
import type { WrkResult } from './wrk-result.js'
import { parseWrkOutput } from './wrk-result.js'

export interface Wrk {
  binary: string
  /** As `wrk -v` prints it (`debian/4.1.0-3+b2`). */
  version: string
}

export interface WrkRun {
  url: string
  headers: Record<string, string>
  connections: number
  /** CLOCK_MONOTONIC milliseconds (monotonicMs) at which slice 0 starts. */
  start: number
  sliceMs: number
  /** This target's slices: its requests leave only within them. */
  own: readonly number[]
  /** Requests leave from this time on, untimed, until the first own slice. */
  warm?: number
  /** At most this many requests per second, paced, instead of a closed loop. */
  rate?: number
}

const SCRIPT = join(projectRoot, 'scripts', 'bench', 'wrk.lua')
/** After the last slice, for its last answers to come in before wrk is stopped. */
export const GRACE_MS = 250
/** Answers slower than this count as wrk's timeouts. */
const TIMEOUT_SECONDS = 10

/** The clock wrk.lua reads (CLOCK_MONOTONIC, as process.hrtime), in milliseconds. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6
}

/** When the run's last slice ends. */
export function runEnd(run: WrkRun): number {
  return run.start + (Math.max(...run.own) + 1) * run.sliceMs
}

export function wrkArgs(run: WrkRun, seconds: number): string[] {
  const headers = Object.entries(run.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`])
  const settings = [`start=${run.start.toFixed(3)}`, `slice=${run.sliceMs}`, `own=${run.own.join(',')}`]
  if (run.warm !== undefined) settings.push(`warm=${run.warm.toFixed(3)}`)
  if (run.rate !== undefined) settings.push(`rate=${run.rate}`)
  return ['-t1', `-c${run.connections}`, `-d${seconds}s`, `--timeout`, `${TIMEOUT_SECONDS}s`, '-s', SCRIPT, ...headers, run.url, ...settings]
}

/**
 * Runs wrk for `run`: `hooks.running` when slice 0 starts, `hooks.done` once
 * the last slice is over and its answers in, then SIGINT; resolves with the
 * script's result once wrk has exited.
 */
export function runWrk(wrk: Wrk, run: WrkRun, hooks: LoadHooks = {}): Promise<WrkResult> {
  const end = runEnd(run) + GRACE_MS
  // Long enough never to end on its own: it is stopped at `end`.
  const seconds = Math.ceil((end - monotonicMs()) / 1000) + 5
  const child = spawn(wrk.binary, wrkArgs(run, seconds), { stdio: ['ignore', 'pipe', 'pipe'] })
  track(child)
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4096)))
  const running = setTimeout(() => hooks.running?.(), Math.max(0, run.start - monotonicMs()))
  const stop = setTimeout(
    () => {
      hooks.done?.()
      child.kill('SIGINT')
    },
    Math.max(0, end - monotonicMs()),
  )
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => {
      clearTimeout(running)
      clearTimeout(stop)
      if (code !== 0) reject(new Error(`wrk exited ${code}: ${stderr.trim()}`))
      else {
        try {
          resolve(parseWrkOutput(stdout))
        } catch (error) {
          reject(error instanceof Error ? new Error(`${error.message} ${stderr.trim()}`) : error)
        }
      }
    })
  })
}
