/**
 * The whole stack as processes for end-to-end tests: agency-service and
 * resource-service, and one or more gateway replicas over HTTPS with a
 * throw-away certificate and a route map pointing at those services, all on
 * one test database and one test Redis prefix.
 *
 * `startStack(t, n)` starts n replicas on the shared test Redis. With options
 * instead: a Redis of the test's own (a private redis-server, say), extra
 * environment for every process or for the gateways only, and replicas that
 * the test starts (`startReplica`) and stops or signals (`replicas[i]`) itself,
 * a DATABASE_URL per process (`databaseUrls`: least-privilege logins, say), and
 * backends that listen with TLS behind https:// routes (`backendTls`).
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { createTestDatabase } from './database.js'
import type { TestDatabase } from './database.js'
import { createTestRedis } from './redis.js'
import { makeCertificate } from './https.js'
import { issueCertificate, makeCa } from './tls-ca.js'
import type { IssuedCertificate } from './tls-ca.js'
import { freePort, startProcess } from './processes.js'
import type { ProcessEnv, RunningProcess } from './processes.js'

const STARTUP_MS = 60_000

export interface StackOptions {
  /** Gateway replicas started with the stack (default 1; 0 to start them with startReplica). */
  replicas?: number
  /** A Redis of the test's own instead of the shared test Redis; the prefix defaults to a fresh one. */
  redis?: { url: string; prefix?: string }
  /** Extra environment for every process of the stack (backends and gateways). */
  env?: ProcessEnv
  /** Extra environment for the gateway replicas only. */
  gatewayEnv?: ProcessEnv
  /**
   * Extra environment for one backend only: `{ REDIS_URL: '' }` keeps its
   * nonces in its own memory (one replica), for a test whose Redis faults are
   * about the gateway (a backend with REDIS_URL refuses every signed request
   * while its Redis cannot record a nonce: test/e2e/backend-replay.test.ts).
   */
  backendEnv?: { agency?: ProcessEnv; resource?: ProcessEnv }
  /**
   * A DATABASE_URL per process (a least-privilege login each, say), made once
   * the test database exists; a process left out uses the database's owner.
   */
  databaseUrls?: (db: TestDatabase) => Promise<ServiceDatabaseUrls>
  /**
   * The backends listen with mutual TLS (a certificate of a throw-away CA, and only client certificates of that CA
   * admitted), with their probes on health ports of their own; the routes are https:// with that CA as tls.caFile
   * and the gateway's client certificate as tls.certFile/keyFile, as the shipped deployments have them.
   */
  backendTls?: boolean
}

export interface ServiceDatabaseUrls {
  gateway?: string
  agency?: string
  resource?: string
}

export interface StackReplica {
  /** HTTPS API port. */
  port: number
  /** Operations listener port (/healthz, /readyz, /metrics). */
  adminPort: number
  process: RunningProcess
  /** The process id, to signal it (SIGSTOP, SIGCONT, …). */
  pid: number
  /** Sends `signal` (SIGTERM by default) and resolves with the exit code once it has exited. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

export interface Stack {
  db: TestDatabase
  /** The HTTPS API port of each gateway replica (those started later too). */
  gatewayPorts: number[]
  /** The PEM certificate the gateways present (for localhost and 127.0.0.1). */
  cert: string
  /** Every gateway replica started so far, in order. */
  replicas: StackReplica[]
  redis: { url: string; prefix: string }
  /** TENANT_SIGNING_SECRET of every process of the stack. */
  secret: string
  /** The environment every process of the stack shares (database, Redis, prefix, secret, and options.env). */
  env: ProcessEnv
  /** The environment for `ctl` against the same database and Redis prefix, with the secret (so it takes the Redis fast path). */
  ctlEnv: ProcessEnv
  backends: { agency: RunningProcess; resource: RunningProcess; agencyPort: number; resourcePort: number }
  /** The route map the replicas read (ROUTES_FILE). */
  routesFile: string
  /** With backendTls: the CA file that signed the backends' certificate. */
  backendCaFile?: string
  /** With backendTls: the backends' server certificate, the gateway's client certificate, and the backends' health ports. */
  internalTls?: { backend: IssuedCertificate; gatewayClient: IssuedCertificate; agencyHealthPort: number; resourceHealthPort: number }
  /** Starts one more gateway replica with `extra` environment on top of the stack's. */
  startReplica(extra?: ProcessEnv): Promise<StackReplica>
}

function databaseUrl(url: string | undefined): ProcessEnv {
  return url === undefined ? {} : { DATABASE_URL: url }
}

export async function startStack(t: Test, replicasOrOptions: number | StackOptions = 1): Promise<Stack> {
  const options: StackOptions = typeof replicasOrOptions === 'number' ? { replicas: replicasOrOptions } : replicasOrOptions
  const db = await createTestDatabase(t)
  const redis =
    options.redis === undefined
      ? await createTestRedis(t)
      : { url: options.redis.url, prefix: options.redis.prefix ?? `sak-test-${randomBytes(6).toString('hex')}:` }
  const dir = mkdtempSync(join(tmpdir(), 'stack-e2e-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const tls = await makeCertificate(dir)
  const [agencyPort, resourcePort] = [await freePort(), await freePort()]
  const routesFile = join(dir, 'routes.yaml')
  // With backendTls the backends listen with a certificate of a throw-away CA, and every route names that CA.
  const backendCa = options.backendTls === true ? await makeCa(dir, 'backend-ca') : undefined
  const backendCertificate = backendCa === undefined ? undefined : await issueCertificate(backendCa, dir, 'backend', { usage: 'server' })
  const gatewayClient = backendCa === undefined ? undefined : await issueCertificate(backendCa, dir, 'gateway-client', { usage: 'client' })
  const healthPorts = backendCa === undefined ? undefined : { AGENCY_SERVICE: await freePort(), RESOURCE_SERVICE: await freePort() }
  const scheme = backendCa === undefined ? 'http' : 'https'
  const transport =
    backendCa === undefined || gatewayClient === undefined
      ? ''
      : `, tls: { caFile: "${backendCa.certFile}", certFile: "${gatewayClient.certFile}", keyFile: "${gatewayClient.keyFile}" }`
  writeFileSync(
    routesFile,
    `routes:
  - { prefix: /v1/agency, scope: AGENCY, upstream: "${scheme}://127.0.0.1:${agencyPort}", permission: agency${transport} }
  - { prefix: /v1/agency/sub-accounts, scope: AGENCY, upstream: "${scheme}://127.0.0.1:${agencyPort}", permission: sub-accounts${transport} }
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "${scheme}://127.0.0.1:${resourcePort}", permission: agents${transport} }
  - { prefix: /v1/contacts, scope: SUB-ACCOUNT, upstream: "${scheme}://127.0.0.1:${resourcePort}", permission: contacts${transport} }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "${scheme}://127.0.0.1:${resourcePort}", permission: calls${transport} }
  - { prefix: /v1/usage, scope: SUB-ACCOUNT, upstream: "${scheme}://127.0.0.1:${agencyPort}", permission: usage${transport} }
  - { prefix: /v1/request-log, scope: SUB-ACCOUNT, upstream: "${scheme}://127.0.0.1:${agencyPort}", permission: request-log${transport} }
  - { prefix: /console, auth: session, upstream: "${scheme}://127.0.0.1:${agencyPort}"${transport} }
`,
  )
  const backendTlsEnv = (service: 'AGENCY_SERVICE' | 'RESOURCE_SERVICE'): ProcessEnv =>
    backendCertificate === undefined || backendCa === undefined || healthPorts === undefined
      ? {}
      : {
          [`${service}_TLS_CERT_FILE`]: backendCertificate.certFile,
          [`${service}_TLS_KEY_FILE`]: backendCertificate.keyFile,
          [`${service}_TLS_CLIENT_CA_FILE`]: backendCa.certFile,
          [`${service}_HEALTH_PORT`]: String(healthPorts[service]),
        }
  const secret = randomBytes(32).toString('hex')
  const common: ProcessEnv = {
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: redis.prefix,
    TENANT_SIGNING_SECRET: secret,
    LOG_LEVEL: 'info',
    // agency-service reads the permission names from the gateways' routes file.
    ROUTES_FILE: routesFile,
    ...options.env,
  }
  const urls = (await options.databaseUrls?.(db)) ?? {}
  const [agency, resource] = await Promise.all([
    startProcess(
      t,
      'agency-service/src/main.ts',
      { ...common, ...databaseUrl(urls.agency), ...backendTlsEnv('AGENCY_SERVICE'), ...options.backendEnv?.agency, AGENCY_SERVICE_PORT: String(agencyPort) },
      /agency-service ready/,
      STARTUP_MS,
    ),
    startProcess(
      t,
      'resource-service/src/main.ts',
      {
        ...common,
        ...databaseUrl(urls.resource),
        ...backendTlsEnv('RESOURCE_SERVICE'),
        ...options.backendEnv?.resource,
        RESOURCE_SERVICE_PORT: String(resourcePort),
      },
      /resource-service ready/,
      STARTUP_MS,
    ),
  ])
  const gatewayPorts: number[] = []
  const replicas: StackReplica[] = []

  async function startReplica(extra: ProcessEnv = {}): Promise<StackReplica> {
    const [api, http, admin] = [await freePort(), await freePort(), await freePort()]
    const process = await startProcess(
      t,
      'gateway/src/main.ts',
      {
        ...common,
        ...databaseUrl(urls.gateway),
        GATEWAY_HOST: '127.0.0.1',
        GATEWAY_PORT: String(api),
        GATEWAY_HTTP_PORT: String(http),
        GATEWAY_ADMIN_PORT: String(admin),
        TLS_CERT_FILE: tls.certFile,
        TLS_KEY_FILE: tls.keyFile,
        ROUTES_FILE: routesFile,
        ...options.gatewayEnv,
        ...extra,
      },
      /gateway ready/,
      STARTUP_MS,
    )
    const replica: StackReplica = { port: api, adminPort: admin, process, pid: process.child.pid!, stop: (signal) => process.stop(signal) }
    gatewayPorts.push(api)
    replicas.push(replica)
    return replica
  }

  for (let i = 0; i < (options.replicas ?? 1); i++) await startReplica()
  return {
    db,
    gatewayPorts,
    cert: tls.cert,
    replicas,
    redis,
    secret,
    env: common,
    ctlEnv: { DATABASE_URL: db.url, REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, TENANT_SIGNING_SECRET: secret, ROUTES_FILE: routesFile },
    backends: { agency, resource, agencyPort, resourcePort },
    routesFile,
    ...(backendCa === undefined ? {} : { backendCaFile: backendCa.certFile }),
    ...(backendCertificate === undefined || gatewayClient === undefined || healthPorts === undefined
      ? {}
      : {
          internalTls: {
            backend: backendCertificate,
            gatewayClient,
            agencyHealthPort: healthPorts.AGENCY_SERVICE,
            resourceHealthPort: healthPorts.RESOURCE_SERVICE,
          },
        }),
    startReplica,
  }
}
