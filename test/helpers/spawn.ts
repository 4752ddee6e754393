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
import { closeSync, openSync, readSync, statSync } from 'node:fs'

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
  /**
   * Its stdout goes to this file (appended to) instead of a pipe: nothing of
   * the parent's has to drain it, and a pattern in `ready` sees only stderr
   * (use a probe). `output()` and `tail()` cover stderr and the file's end.
   */
  stdoutFile?: string
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

/** How much of the end of a `stdoutFile` output() and tail() read. */
const FILE_END_BYTES = 16_384

function fileEnd(file: string, bytes: number): string {
  const size = statSync(file, { throwIfNoEntry: false })?.size ?? 0
  if (size === 0) return ''
  const fd = openSync(file, 'r')
  try {
    const length = Math.min(size, bytes)
    const buffer = Buffer.alloc(length)
    readSync(fd, buffer, 0, length, size - length)
    return buffer.toString()
  } finally {
    closeSync(fd)
  }
}

export function spawnUntilReady(options: SpawnOptions): Promise<Spawned> {
  const { name, ready, timeoutMs = 30_000, keepOutput = Infinity } = options
  const stdoutFd = options.stdoutFile === undefined ? undefined : openSync(options.stdoutFile, 'a')
  const child = spawn(options.command, options.args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'],
    detached: options.detached ?? false,
  })
  // The child has its own copy of the descriptor.
  if (stdoutFd !== undefined) closeSync(stdoutFd)
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
  child.stdout?.on('data', onOutput)
  child.stderr!.on('data', onOutput)
  if (options.log !== undefined) {
    child.stdout?.pipe(options.log)
    child.stderr!.pipe(options.log)
  }
  const stdoutFile = options.stdoutFile
  const everything = (): string => (stdoutFile === undefined ? output : `${fileEnd(stdoutFile, FILE_END_BYTES)}${output}`)
  const tail = (lines = 20): string => everything().trim().split('\n').slice(-lines).join('\n')
  const spawned: Spawned = {
    name,
    child,
    pid: child.pid ?? -1,
    output: () => {
      const all = everything()
      return all.length > keepOutput ? all.slice(-keepOutput) : all
    },
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
      child.stdout?.off('data', check)
      child.stderr!.off('data', check)
      if (error === undefined) return resolve(spawned)
      if (running) child.kill('SIGKILL')
      reject(error)
    }
    const timer = setTimeout(() => settle(new Error(`${name} not ready after ${timeoutMs} ms:\n${tail()}`)), timeoutMs)
    if (ready instanceof RegExp) {
      child.stdout?.on('data', check)
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
