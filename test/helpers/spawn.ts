/**
 * Starting a child process and waiting until it is ready: the one way the
 * tests (processes.ts), `npm start` (scripts/start.ts) and the benchmark
 * (scripts/bench/processes.ts) do it. Ready means a pattern seen in its
 * output or a probe that answers true (polled every 100 ms); exiting first,
 * failing to spawn or taking longer than the timeout rejects, with the last
 * of its output in the message. Its output is always drained (a full pipe
 * would stall the child under load).
 */
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'

export interface SpawnOptions {
  /** For messages. */
  name: string
  command: string
  args: string[]
  /** The child's whole environment. */
  env: NodeJS.ProcessEnv
  cwd: string
  ready: RegExp | (() => Promise<boolean>)
  timeoutMs?: number
  /** How much of the output `output()` keeps, in characters: all of it by default (tests read log lines from it). */
  keepOutput?: number
  /** Where the output also goes (a log file). */
  log?: NodeJS.WritableStream
  /** In a process group of its own, so that a Ctrl-C in the terminal reaches only the parent. */
  detached?: boolean
}

export interface Spawned {
  readonly name: string
  readonly child: ChildProcess
  readonly pid: number
  /** What it has written to stdout and stderr so far (the last `keepOutput` characters). */
  output(): string
  /** Its last lines of output, for messages. */
  tail(lines?: number): string
  /** Settles with its exit code (null when a signal ended it). */
  readonly exited: Promise<number | null>
  /** Sends `signal` (SIGTERM by default) and waits for the exit; SIGKILL after `graceMs` when given. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>
}

export function spawnUntilReady(options: SpawnOptions): Promise<Spawned> {
  const { name, ready, timeoutMs = 30_000, keepOutput = Infinity } = options
  const child = spawn(options.command, options.args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  })
  let output = ''
  let running = true
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      running = false
      resolve(code)
    }),
  )
  const onOutput = (chunk: Buffer): void => {
    output += chunk.toString()
    // Trimmed in steps, not on every chunk: a chatty child would otherwise cost a copy per line.
    if (output.length > 2 * keepOutput) output = output.slice(-keepOutput)
  }
  child.stdout!.on('data', onOutput)
  child.stderr!.on('data', onOutput)
  if (options.log !== undefined) {
    child.stdout!.pipe(options.log)
    child.stderr!.pipe(options.log)
  }
  const tail = (lines = 20): string => output.trim().split('\n').slice(-lines).join('\n')
  const spawned: Spawned = {
    name,
    child,
    pid: child.pid ?? -1,
    output: () => (output.length > keepOutput ? output.slice(-keepOutput) : output),
    tail,
    exited,
    async stop(signal = 'SIGTERM', graceMs) {
      if (!running) return exited
      child.kill(signal)
      const force = graceMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), graceMs)
      const code = await exited
      clearTimeout(force)
      return code
    },
  }
  return new Promise((resolve, reject) => {
    let settled = false
    let poll: NodeJS.Timeout | undefined
    const check = (): void => {
      if (ready instanceof RegExp && ready.test(output)) settle()
    }
    const settle = (error?: Error): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      clearInterval(poll)
      child.stdout!.off('data', check)
      child.stderr!.off('data', check)
      if (error === undefined) return resolve(spawned)
      if (running) child.kill('SIGKILL')
      reject(error)
    }
    const timer = setTimeout(() => settle(new Error(`${name} not ready after ${timeoutMs} ms:\n${tail()}`)), timeoutMs)
    if (ready instanceof RegExp) {
      child.stdout!.on('data', check)
      child.stderr!.on('data', check)
    } else {
      let probing = false
      poll = setInterval(() => {
        if (probing) return
        probing = true
        ready().then(
          (ok) => {
            probing = false
            if (ok) settle()
          },
          () => (probing = false),
        )
      }, 100)
    }
    child.once('error', (error) => settle(new Error(`${name} could not start: ${error.message}`)))
    void exited.then((code) => settle(new Error(`${name} exited with ${code ?? child.signalCode} before it was ready:\n${tail()}`)))
  })
}
