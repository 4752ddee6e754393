/**
 * The benchmark's child processes: started with their output drained (a full
 * pipe would stall them under load) but the last few KiB kept for an error
 * message, stopped by their own pid, and killed if the orchestrator exits.
 */
import type { ChildProcess } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { join } from 'node:path'
import { projectRoot } from '../../test/helpers/processes.js'
import { spawnUntilReady } from '../../test/helpers/spawn.js'

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

export interface StartOptions {
  timeoutMs?: number
  /** Its stdout goes to this file instead of a pipe the orchestrator drains (`ready` must then be a probe). */
  stdoutFile?: string
}

/**
 * Starts `command` (the toolkit's spawnUntilReady, keeping the last 16 KiB of
 * its output) and resolves once `ready` holds; killed if the orchestrator exits.
 */
export async function start(
  name: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp | (() => Promise<boolean>),
  options: StartOptions = {},
): Promise<Started> {
  const launched = spawnUntilReady({
    name,
    command,
    args,
    env: { ...process.env, ...env },
    cwd: projectRoot,
    ready,
    timeoutMs: options.timeoutMs ?? 30_000,
    keepOutput: 16_384,
    stdoutFile: options.stdoutFile,
  })
  const spawned = await launched
  track(spawned.child)
  return {
    name,
    pid: spawned.pid,
    tail: () => spawned.tail(),
    async stop(graceMs = 10_000) {
      await spawned.stop('SIGTERM', graceMs)
    },
  }
}

/** A Node script of this repository, with the orchestrator's loader flags (tsx, the scoped-dev condition). */
export function startNode(
  name: string,
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp | (() => Promise<boolean>),
  nodeArgs: string[] = [],
): Promise<Started> {
  return start(name, process.execPath, [...process.execArgv, ...nodeArgs, script, ...args], env, ready)
}

/** An executable `name` on PATH (or in one of `more` directories), or null when there is none. */
export function findExecutable(name: string, more: readonly string[] = []): string | null {
  for (const dir of [...(process.env['PATH'] ?? '').split(':'), ...more]) {
    if (dir === '') continue
    try {
      accessSync(join(dir, name), constants.X_OK)
      return join(dir, name)
    } catch {
      // not here
    }
  }
  return null
}

export { freePort } from '../../test/helpers/processes.js'
