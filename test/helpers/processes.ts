/**
 * Running the project's programs as real processes: the CLI, and services
 * (gateway, backends) that are stopped at teardown.
 */
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import type { Teardown } from './teardown.js'
import { spawnUntilReady } from './spawn.js'
import type { Spawned } from './spawn.js'

export const projectRoot = fileURLToPath(new URL('../..', import.meta.url))
/** Node flags that run a TypeScript entry point of this workspace, as the npm scripts do. */
export const tsNodeArgs = ['--import', 'tsx', '--conditions=scoped-dev']

export type ProcessEnv = Record<string, string | undefined>

/** The environment a child gets: this process's, minus anything that would configure it by accident. */
export function childEnv(env: ProcessEnv): ProcessEnv {
  const base: ProcessEnv = { ...process.env }
  for (const name of [
    'DATABASE_URL',
    'REDIS_URL',
    'REDIS_KEY_PREFIX',
    'TENANT_SIGNING_SECRET',
    'TENANT_SIGNING_SECRET_PREVIOUS',
    'ROUTES_FILE',
    'TLS_CERT_FILE',
    'TLS_KEY_FILE',
    'WEBHOOK_ALLOW_PRIVATE_ADDRESSES',
  ]) {
    delete base[name]
  }
  for (const name of Object.keys(base)) if (name.startsWith('TAP')) delete base[name]
  return { ...base, ...env }
}

export interface CliResult {
  status: number | null
  stdout: string
  stderr: string
  json: unknown
}

/** Runs `ctl` as `npm run --silent ctl` does; `input` is written to its stdin. */
export function runCtl(args: string[], env: ProcessEnv, input = ''): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...tsNodeArgs, 'agency-service/src/ctl.ts', ...args], {
      cwd: projectRoot,
      env: childEnv(env),
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (status) => {
      const text = status === 0 ? stdout : stderr
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        json = undefined
      }
      resolve({ status, stdout, stderr, json })
    })
    child.stdin.end(input)
  })
}

/**
 * Where freePort picks: below the ephemeral ports (Linux's 32768–60999, macOS's 49152–65535) and above the usual
 * services'. The system hands none of these out on its own, so no other test's listen(0) nor outgoing connection
 * takes one between its pick and its use.
 */
const PICKED_PORTS = { first: 20_000, last: 32_000 } as const
const handedOut = new Set<number>()

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * A port nothing listens on, which stays so until its user binds it: for a child process to listen on, or for a
 * server that is down (connections refused) and may come up there later.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 1_000; attempt++) {
    const port = PICKED_PORTS.first + Math.floor(Math.random() * (PICKED_PORTS.last - PICKED_PORTS.first))
    if (handedOut.has(port) || !(await bindable(port))) continue
    handedOut.add(port)
    return port
  }
  throw new Error(`no free port from ${PICKED_PORTS.first} to ${PICKED_PORTS.last}`)
}

export type RunningProcess = Spawned

/**
 * Starts `entry` (a path from the project root) and resolves once `ready`
 * matches its output; rejects if it exits first or takes longer than
 * `timeoutMs`. Killed at teardown.
 */
export async function startProcess(t: Teardown, entry: string, env: ProcessEnv, ready: RegExp, timeoutMs = 20_000): Promise<RunningProcess> {
  const started = spawnUntilReady({
    name: entry,
    command: process.execPath,
    args: [...tsNodeArgs, entry],
    env: childEnv(env),
    cwd: projectRoot,
    ready,
    timeoutMs,
  })
  const running = await started
  t.teardown(() => running.stop('SIGKILL'))
  return running
}

/** Runs `entry` until it exits by itself (a start that must fail, say); answers its status and stderr. */
export function runToExit(entry: string, env: ProcessEnv): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...tsNodeArgs, entry], { cwd: projectRoot, env: childEnv(env), stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (status) => resolve({ status, stderr }))
  })
}
