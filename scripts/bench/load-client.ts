/**
 * The orchestrator's side of the load generators: runs scripts/bench/load.ts
 * (or side-by-side-load.ts) in its own process (so the generator never shares
 * an event loop with the orchestrator or a target) and reads its JSON lines:
 * `running` when the timed part starts, `done` when the last timed answer has
 * arrived, then the result. The hooks let the caller sample the target
 * exactly then. When wrk is the run's generator (load-generator.ts), runLoad
 * hands it the loads it can send (wrk-load.ts), with the same hooks.
 */
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import type { Latency } from './stats.js'
import { projectRoot } from '../../test/helpers/processes.js'
import { loadGenerator } from './load-generator.js'
import { track } from './processes.js'
import { wrkCanSend, wrkLoad } from './wrk-load.js'

export interface LoadSpec {
  url: string
  /** Sent with every request (a key's Authorization, for instance). */
  headers: Record<string, string>
  /** Keep-alive connections, each a closed loop: the next request leaves when the previous answer is read. */
  connections: number
  /** Closed loop for this long. */
  seconds?: number
  /** Instead: each of these keys once (as `Authorization: Bearer`), in order. */
  keys?: string[]
  /** Instead: this many distinct, well-formed, random (so unknown) keys, each once. */
  unknownKeys?: number
  /** A random X-Forwarded-For per request (for a gateway that trusts 127.0.0.1). */
  randomForwardedFor?: boolean
  /** Before timing, one untimed request per connection with `headers` (opens the TLS connections). */
  prime?: boolean
  /** Before timing, this long of the same closed loop with `headers`, untimed (the target reaches its steady state under load). */
  warmUpSeconds?: number
}

export interface LoadResult extends Latency {
  requests: number
  seconds: number
  perSecond: number
  /** By HTTP status, and `error` for requests that got no answer. */
  statuses: Record<string, number>
  firstError?: string
  /** CPU of the generator itself per request, to tell when it, not the target, is the limit. */
  generatorCpuUsPerRequest: number
}

export interface LoadHooks {
  running?: () => void
  done?: () => void
}

/**
 * Runs a generator script of scripts/bench/ in its own process with `spec`
 * as its argument, and reads its JSON lines: `running` and `done` call the
 * hooks (the caller samples the targets exactly then), `result` is what the
 * promise settles with once the process has exited 0.
 */
export function runGenerator<Result>(script: string, spec: object, hooks: LoadHooks = {}): Promise<Result> {
  const child = spawn(process.execPath, [...process.execArgv, script, JSON.stringify(spec)], {
    cwd: projectRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  track(child)
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4096)))
  let result: Result | undefined
  createInterface({ input: child.stdout }).on('line', (text) => {
    const message = JSON.parse(text) as { event: 'running' | 'done' | 'result'; result?: Result }
    if (message.event === 'running') hooks.running?.()
    else if (message.event === 'done') hooks.done?.()
    else result = message.result
  })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => {
      if (code === 0 && result !== undefined) resolve(result)
      else reject(new Error(`${script} exited ${code}: ${stderr.trim()}`))
    })
  })
}

/** load.ts's load: from wrk when it is the run's generator and can send it (load-generator.ts), else from load.ts. */
export function runLoad(spec: LoadSpec, hooks: LoadHooks = {}): Promise<LoadResult> {
  const { wrk } = loadGenerator()
  if (wrk !== null && wrkCanSend(spec)) return wrkLoad(wrk, spec, hooks)
  return runGenerator<LoadResult>('scripts/bench/load.ts', spec, hooks)
}
