/**
 * `npm run bench`: the gateway against a bare @fastify/http-proxy and the
 * backend alone, measured in one run on this machine.
 *
 * All three serve the same small GET /v1/agents answer from the same
 * upstream process. The bare proxy and the gateway both terminate TLS with
 * the same certificate; the gateway also authenticates a (warm) API key,
 * checks its scope, strips and signs tenant headers, logs a line per request
 * and counts metrics. Rounds alternate between the two proxies so drift of
 * the machine hits both alike. Printed: throughput, latency, memory, and the
 * ratios that the targets are about:
 *   - gateway / bare proxy throughput  ≥ 0.95
 *   - gateway peak RSS / bare proxy peak RSS  ≤ 1.5
 *
 * Needs Redis (REDIS_URL, default redis://127.0.0.1:6379) so that a warm key
 * costs no round trip, and Postgres (DATABASE_URL, default: a temporary
 * database on postgres://postgres@127.0.0.1:5432).
 */
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { generate } from 'selfsigned'
import pg from 'pg'
import { Redis } from 'ioredis'
import { createPool } from '@scoped/shared/db'
import { migrate } from '@scoped/shared/migrate'
import { localOnlyInvalidator } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { createAgency, createSubAccount } from '@scoped/agency-service/tenants'
import { runLoad } from './bench/load.js'
import type { LoadResult } from './bench/load.js'

const root = fileURLToPath(new URL('..', import.meta.url))
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3)
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5)
const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 32)

const children: ChildProcess[] = []
process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')))

function start(args: string[], env: NodeJS.ProcessEnv, ready: RegExp): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...process.execArgv, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  let output = ''
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-8192)
      if (ready.test(output)) {
        child.stdout!.off('data', onData)
        child.stderr!.off('data', onData)
        // Keep draining: a full pipe would stall the process under load.
        child.stdout!.resume()
        child.stderr!.resume()
        resolve(child)
      }
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', onData)
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}:\n${output}`)))
  })
}

async function port(): Promise<number> {
  const { createServer } = await import('node:net')
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0))
    })
  })
}

/** Resident memory of a process, in MiB, from /proc. */
function rssMiB(child: ChildProcess): number {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8')
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
  return kb / 1024
}

async function database(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (process.env['DATABASE_URL']) return { url: process.env['DATABASE_URL'], drop: async () => undefined }
  const server = 'postgres://postgres@127.0.0.1:5432/postgres'
  const name = `sak_bench_${randomBytes(4).toString('hex')}`
  const admin = new pg.Client({ connectionString: server })
  await admin.connect().catch((error: unknown) => {
    throw new Error(`the benchmark needs Postgres: set DATABASE_URL or run one on 127.0.0.1:5432 (${String(error)})`, { cause: error })
  })
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  return {
    url: server.replace(/\/postgres$/, `/${name}`),
    drop: async () => {
      const client = new pg.Client({ connectionString: server })
      await client.connect()
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await client.end()
    },
  }
}

function line(name: string, result: LoadResult, rss: number): string {
  const ok = result.statuses[200] ?? 0
  return `${name.padEnd(14)} ${result.perSecond.toFixed(0).padStart(7)} req/s   p50 ${result.p50Ms.toFixed(2).padStart(6)} ms   p99 ${result.p99Ms.toFixed(2).padStart(6)} ms   rss ${rss.toFixed(0).padStart(4)} MiB   200s ${ok}/${result.requests}`
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? 0
}

async function main(): Promise<void> {
  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await redis.connect().catch((error: unknown) => {
    throw new Error(`the benchmark needs Redis: set REDIS_URL or run one on 127.0.0.1:6379 (${String(error)})`, { cause: error })
  })
  const prefix = `sak-bench-${randomBytes(4).toString('hex')}:`
  const db = await database()
  const work = mkdtempSync(join(tmpdir(), 'sak-bench-'))
  try {
    await migrate(db.url)
    const pool = createPool(db.url, { max: 2 })
    const agency = await createAgency(pool, 'Bench Agency')
    const sub = await createSubAccount(pool, agency.id, 'Bench Sub-account')
    const { key } = await new KeyService(pool, localOnlyInvalidator).create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'bench', 'bench')
    await pool.end()

    const pems = await generate([{ name: 'commonName', value: 'localhost' }], { keySize: 2048, algorithm: 'sha256' })
    const certFile = join(work, 'cert.pem')
    const keyFile = join(work, 'key.pem')
    writeFileSync(certFile, pems.cert)
    writeFileSync(keyFile, pems.private, { mode: 0o600 })

    const [upstreamPort, barePort, gatewayPort, httpPort, adminPort] = await Promise.all([port(), port(), port(), port(), port()])
    const routesFile = join(work, 'routes.yaml')
    writeFileSync(routesFile, `routes:\n  - prefix: /v1/agents\n    scope: SUB-ACCOUNT\n    upstream: http://127.0.0.1:${upstreamPort}\n`)

    const upstream = await start(['scripts/bench/upstream.ts', String(upstreamPort)], {}, /upstream ready/)
    const bare = await start(['scripts/bench/bare-proxy.ts', String(barePort), String(upstreamPort), certFile, keyFile], {}, /bare proxy ready/)
    const gateway = await start(
      ['gateway/src/main.ts'],
      {
        DATABASE_URL: db.url,
        REDIS_URL: redisUrl,
        REDIS_KEY_PREFIX: prefix,
        TENANT_SIGNING_SECRET: randomBytes(32).toString('hex'),
        ROUTES_FILE: routesFile,
        TLS_CERT_FILE: certFile,
        TLS_KEY_FILE: keyFile,
        GATEWAY_HOST: '127.0.0.1',
        GATEWAY_PORT: String(gatewayPort),
        GATEWAY_HTTP_PORT: String(httpPort),
        GATEWAY_ADMIN_PORT: String(adminPort),
        LOG_LEVEL: 'info',
      },
      /gateway ready/,
    )

    const auth = { authorization: `Bearer ${key}` }
    const targets = {
      backend: { url: `http://127.0.0.1:${upstreamPort}/v1/agents`, headers: {}, child: upstream },
      'bare proxy': { url: `https://127.0.0.1:${barePort}/v1/agents`, headers: {}, child: bare },
      gateway: { url: `https://127.0.0.1:${gatewayPort}/v1/agents`, headers: auth, child: gateway },
    }
    process.stdout.write(`benchmark: ${ROUNDS} rounds × ${SECONDS} s per target, ${CONNECTIONS} keep-alive connections, GET /v1/agents\n\n`)
    // Warm-up: JIT, connection pools, and the key into the gateway's caches.
    for (const target of Object.values(targets)) await runLoad(target.url, target.headers, 1_000, CONNECTIONS)

    const rates: Record<string, number[]> = { backend: [], 'bare proxy': [], gateway: [] }
    const peakRss: Record<string, number> = { backend: 0, 'bare proxy': 0, gateway: 0 }
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? (['backend', 'bare proxy', 'gateway'] as const) : (['gateway', 'bare proxy', 'backend'] as const)
      for (const name of order) {
        const target = targets[name]
        const result = await runLoad(target.url, target.headers, SECONDS * 1000, CONNECTIONS)
        const rss = rssMiB(target.child)
        peakRss[name] = Math.max(peakRss[name]!, rss)
        if ((result.statuses[200] ?? 0) !== result.requests) throw new Error(`${name} answered other than 200: ${JSON.stringify(result.statuses)}`)
        rates[name]!.push(result.perSecond)
        process.stdout.write(`round ${round}  ${line(name, result, rss)}\n`)
      }
    }

    const throughput = median(rates['gateway']!) / median(rates['bare proxy']!)
    const memory = peakRss['gateway']! / peakRss['bare proxy']!
    process.stdout.write('\n')
    process.stdout.write(`median req/s       backend ${median(rates['backend']!).toFixed(0)}   bare proxy ${median(rates['bare proxy']!).toFixed(0)}   gateway ${median(rates['gateway']!).toFixed(0)}\n`)
    process.stdout.write(`gateway / bare proxy throughput   ${throughput.toFixed(3)}   (target ≥ 0.95)  ${throughput >= 0.95 ? 'met' : 'NOT MET'}\n`)
    process.stdout.write(`gateway / bare proxy peak RSS     ${memory.toFixed(3)}   (target ≤ 1.5)   ${memory <= 1.5 ? 'met' : 'NOT MET'}\n`)
    process.stdout.write(`gateway / backend alone throughput ${(median(rates['gateway']!) / median(rates['backend']!)).toFixed(3)}\n`)
  } finally {
    for (const child of children) child.kill('SIGTERM')
    rmSync(work, { recursive: true, force: true })
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
    await db.drop()
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  },
)
