/**
 * The load generator, a process of its own (see load-client.ts): a closed
 * loop over keep-alive connections (http1-connection.ts), each connection sending
 * its next request as soon as the previous answer has been read in full.
 * Runs for a time, or through a list of keys, or through a number of fresh
 * random keys; optionally after untimed requests (one per connection, or a
 * warm-up of the same closed loop). Writes JSON lines on stdout: {"event":"running"},
 * {"event":"done"}, then {"event":"result","result":{…}}: requests,
 * requests/s, statuses, p50/p99/p99.9 latency.
 */
import { randomInt } from 'node:crypto'
import { generateKey } from '@scoped/shared/keys'
import type { LoadResult, LoadSpec } from './load-client.js'
import { emit, generatorPool } from './generator-pool.js'
import type { Http1Connection } from './http1-connection.js'
import { requestHead } from './http1-connection.js'
import { latency } from './stats.js'

const spec = JSON.parse(process.argv[2] ?? '') as LoadSpec
const url = new URL(spec.url)
const connections = generatorPool(url, spec.connections)
/** The request of every connection when the headers are spec.headers (made once, not per request). */
const usualHead = requestHead(url, spec.headers)

/** The headers of the next request, or null when the run is over. */
function requestSource(): () => Record<string, string> | null {
  const withAddress = (headers: Record<string, string>): Record<string, string> =>
    spec.randomForwardedFor === true ? { ...headers, 'x-forwarded-for': `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}` } : headers
  if (spec.keys !== undefined) {
    const keys = spec.keys
    let next = 0
    return () => (next < keys.length ? withAddress({ ...spec.headers, authorization: `Bearer ${keys[next++]}` }) : null)
  }
  if (spec.unknownKeys !== undefined) {
    let left = spec.unknownKeys
    return () => (left-- > 0 ? withAddress({ ...spec.headers, authorization: `Bearer ${generateKey()}` }) : null)
  }
  const deadline = performance.now() + (spec.seconds ?? 1) * 1000
  return () => (performance.now() < deadline ? withAddress(spec.headers) : null)
}

const statuses: Record<string, number> = {}
let firstError: string | undefined
const latencies: number[] = []

async function send(connection: Http1Connection, headers: Record<string, string>): Promise<string> {
  const status = await connection.request(headers === spec.headers ? usualHead : requestHead(url, headers))
  if (status === 'error') firstError ??= 'a connection closed or an answer could not be read'
  return status
}

if (spec.prime === true) await Promise.all(connections.map((connection) => send(connection, spec.headers)))
if (spec.warmUpSeconds !== undefined) {
  const until = performance.now() + spec.warmUpSeconds * 1000
  await Promise.all(
    connections.map(async (connection) => {
      while (performance.now() < until) await send(connection, spec.headers)
    }),
  )
}
emit({ event: 'running' })
const cpuAtStart = process.cpuUsage()
const start = performance.now()
const next = requestSource()
await Promise.all(
  connections.map(async (connection) => {
    for (let headers = next(); headers !== null; headers = next()) {
      const sent = performance.now()
      const status = await send(connection, headers)
      latencies.push(performance.now() - sent)
      statuses[status] = (statuses[status] ?? 0) + 1
    }
  }),
)
const seconds = (performance.now() - start) / 1000
const cpu = process.cpuUsage(cpuAtStart)
emit({ event: 'done' })
const requests = latencies.length
const result: LoadResult = {
  requests,
  seconds,
  perSecond: requests / seconds,
  statuses,
  ...latency(latencies),
  ...(firstError === undefined ? {} : { firstError }),
  generatorCpuUsPerRequest: requests === 0 ? 0 : (cpu.user + cpu.system) / requests,
}
emit({ event: 'result', result })
for (const connection of connections) connection.close()
process.exit(0)
