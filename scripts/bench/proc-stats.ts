/** What /proc says of a process (CPU time, resident memory) and of the machine. */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { availableParallelism, cpus, loadavg, release, totalmem } from 'node:os'

let ticksPerSecond: number | undefined

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
    } catch {
      ticksPerSecond = 100
    }
  }
  return ticksPerSecond
}

/** User plus system CPU time of the process (all its threads), in microseconds, from /proc/<pid>/stat. */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12]) // utime, stime: fields 14 and 15
  return (ticks * 1_000_000) / clockTicks()
}

/** Resident memory in MiB, from /proc/<pid>/status. */
export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024
}

export interface Machine {
  cpuModel: string
  cores: number
  memoryMiB: number
  node: string
  kernel: string
  /** 1, 5 and 15 minute load averages when the run started: a busy machine makes noisy figures. */
  loadAverage: number[]
}

export function machine(): Machine {
  return {
    cpuModel: cpus()[0]?.model ?? 'unknown',
    cores: availableParallelism(),
    memoryMiB: Math.round(totalmem() / 2 ** 20),
    node: process.version,
    kernel: release(),
    loadAverage: loadavg().map((value) => Math.round(value * 100) / 100),
  }
}
