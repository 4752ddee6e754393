/**
 * The side-by-side generator, a process of its own: `connections` closed
 * loops, each sending one request to every target at the same moment and
 * waiting for all the answers before the next round. So every target serves
 * the same requests, at the same rate, in the same seconds of the machine:
 * a slower moment of a shared machine slows them all alike, and their CPU per
 * request can be compared directly. One untimed second first. Writes JSON
 * lines: {"event":"running"}, {"event":"done"}, then {"event":"result",
 * "result":{"rounds","seconds","statuses":[{…} per target]}}.
 */
import { emit, generatorPool } from './generator-pool.js'
import { requestHead } from './http1-connection.js'

export interface SideBySideSpec {
  targets: Array<{ url: string; headers: Record<string, string> }>
  connections: number
  seconds: number
}

/** What a run reports: rounds completed in the timed part, and each target's answers by status. */
export interface SideBySideResult {
  rounds: number
  seconds: number
  statuses: Array<Record<string, number>>
}

const spec = JSON.parse(process.argv[2] ?? '') as SideBySideSpec
const urls = spec.targets.map((target) => new URL(target.url))
/** [target][loop]: each closed loop has its own connection to every target. */
const pools = urls.map((url) => generatorPool(url, spec.connections))
const heads = urls.map((url, index) => requestHead(url, spec.targets[index]!.headers))
const statuses = spec.targets.map((): Record<string, number> => ({}))

async function send(index: number, loop: number): Promise<void> {
  const status = await pools[index]![loop]!.request(heads[index]!)
  statuses[index]![status] = (statuses[index]![status] ?? 0) + 1
}

/** Closed loops for `seconds`; answers how many rounds (one request to every target) completed. */
async function loops(seconds: number): Promise<number> {
  const until = performance.now() + seconds * 1000
  let rounds = 0
  await Promise.all(
    Array.from({ length: spec.connections }, async (_, loop) => {
      while (performance.now() < until) {
        await Promise.all(spec.targets.map((_, index) => send(index, loop)))
        rounds++
      }
    }),
  )
  return rounds
}

await loops(1)
for (const counts of statuses) for (const status of Object.keys(counts)) delete counts[status]
emit({ event: 'running' })
const start = performance.now()
const rounds = await loops(spec.seconds)
const seconds = (performance.now() - start) / 1000
emit({ event: 'done' })
const result: SideBySideResult = { rounds, seconds, statuses }
emit({ event: 'result', result })
for (const pool of pools) for (const connection of pool) connection.close()
process.exit(0)
