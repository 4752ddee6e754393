/**
 * The issued-key filter's start-up cost: loads every hash of the database
 * named by DATABASE_URL (api_keys and deleted_api_keys) as a gateway replica
 * does at start, and prints the keys, the time, the filter's memory and its
 * measured false-positive rate. docs/operations.md quotes it at 1 M keys.
 *
 *   DATABASE_URL=postgres://… npx tsx scripts/issued-key-load.ts
 */
import { randomBytes } from 'node:crypto'
import { createPool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import { IssuedKeys } from '@scoped/gateway/issued-keys/issued-keys'

const url = process.env['DATABASE_URL']
if (url === undefined) throw new Error('DATABASE_URL is required')
const pool = createPool(url)
const issued = new IssuedKeys({ pool, log: createLogger('issued-key-load', 'silent'), current: () => true, following: () => true })
const heapBefore = process.memoryUsage().arrayBuffers
await issued.start()
const report = issued.report
if (report === undefined) throw new Error('the load failed')
const probes = 1_000_000
let positives = 0
for (let i = 0; i < probes; i++) if (issued.verdict(randomBytes(32).toString('hex')) === 'issued') positives++
console.log(
  JSON.stringify({
    keys: report.keys,
    loadMs: report.ms,
    filterBytes: issued.bytes,
    arrayBuffersGrowth: process.memoryUsage().arrayBuffers - heapBefore,
    falsePositiveRate: positives / probes,
  }),
)
await pool.end()
