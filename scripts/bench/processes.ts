/**
 * The benchmark's child processes: started with their output drained (a full
 * pipe would stall them under load) but the last few KiB kept for an error
 * message, stopped by their own pid, and killed if the orchestrator exits.
 */
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('../../', import.meta.url))

const children = new Set<ChildProcess>()
process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')))

export function track(child: ChildProcess): void {
  children.add(child)
  child.once('exit', () => children.delete(child))
}

export interface Started {
  readonly name: string
  readonly pid: number
  /** The last output, for messages. */
  tail(): string
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>
}

/**
 * Starts `command` and resolves once `ready` holds: a pattern of its output,
 * or a probe (polled every 100 ms). Rejects if it exits first or takes longer than `timeoutMs`.
 */
export function start(
  name: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp | (() => Promise<boolean>),
  timeoutMs = 30_000,
): Promise<Started> {
  const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  track(child)
  let output = Buffer.alloc(0)
  const keep = (chunk: Buffer): void => {
    output = Buffer.concat([output, chunk])
    if (output.length > 16_384) output = output.subarray(output.length - 8_192)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const started: Started = {
    name,
    pid: child.pid ?? -1,
    tail: () => output.toString().trim().split('\n').slice(-20).join('\n'),
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
      await exited
      clearTimeout(timer)
    },
  }
  return new Promise((resolve, reject) => {
    let settled = false
    const settle = (error?: Error): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      clearInterval(poll)
      child.stdout!.off('data', check)
      child.stderr!.off('data', check)
      if (error === undefined) resolve(started)
      else {
        child.kill('SIGKILL')
        reject(error)
      }
    }
    const timer = setTimeout(() => settle(new Error(`${name} not ready after ${timeoutMs} ms:\n${started.tail()}`)), timeoutMs)
    let poll: NodeJS.Timeout | undefined
    const check = (): void => {
      if (ready instanceof RegExp && ready.test(output.toString())) settle()
    }
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
    child.once('exit', (code, signal) => settle(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${started.tail()}`)))
  })
}

/** A Node script of this repository, with the orchestrator's loader flags (tsx, the scoped-dev condition). */
export function startNode(name: string, script: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp | (() => Promise<boolean>)): Promise<Started> {
  return start(name, process.execPath, [...process.execArgv, script, ...args], env, ready)
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}
