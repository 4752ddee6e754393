/**
 * A closed-loop load generator: `connections` keep-alive HTTPS connections,
 * each sending the next request as soon as the previous answer has arrived,
 * for a fixed time. Counts answers by status and keeps latencies.
 */
import { Agent, request } from 'undici'

export interface LoadResult {
  requests: number
  perSecond: number
  statuses: Record<number, number>
  p50Ms: number
  p99Ms: number
}

export async function runLoad(url: string, headers: Record<string, string>, durationMs: number, connections: number): Promise<LoadResult> {
  const dispatcher = new Agent({ connections, pipelining: 1, keepAliveTimeout: 60_000, connect: { rejectUnauthorized: false } })
  const statuses: Record<number, number> = {}
  const latencies: number[] = []
  const start = performance.now()
  const deadline = start + durationMs
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const sent = performance.now()
      const response = await request(url, { headers, dispatcher })
      await response.body.dump()
      latencies.push(performance.now() - sent)
      statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1
    }
  }
  await Promise.all(Array.from({ length: connections }, worker))
  const elapsed = performance.now() - start
  await dispatcher.close()
  latencies.sort((a, b) => a - b)
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0
  return { requests: latencies.length, perSecond: (latencies.length * 1000) / elapsed, statuses, p50Ms: at(0.5), p99Ms: at(0.99) }
}
