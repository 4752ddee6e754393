/**
 * The stack the gateway tests run against: a migrated test database, an own
 * Redis prefix (or none), the echo upstream as a process, a routes file, a
 * certificate, and gateway replicas: in this process by default
 * (startReplica, test/helpers/in-process-gateway.ts, on ports of their own),
 * as processes (gateway/src/main.ts) for tests that need one
 * (startReplicaProcess: signals, exit codes, the process's own output).
 */
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { CreatedKey } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import type { Gateway } from '@scoped/gateway/app'
import type { TestDatabase } from '../helpers/database.js'
import { createTestDatabase } from '../helpers/database.js'
import type { TestRedis } from '../helpers/redis.js'
import { createTestRedis } from '../helpers/redis.js'
import type { HttpsClient } from '../helpers/https.js'
import { httpsClient, makeCertificate } from '../helpers/https.js'
import { startInProcessGateway } from '../helpers/in-process-gateway.js'
import type { ProcessEnv, RunningProcess } from '../helpers/processes.js'
import { freePort, startProcess } from '../helpers/processes.js'
import type { Teardown } from '../helpers/teardown.js'

/** What a test uses of a replica, wherever it runs. */
export interface ReplicaBase {
  client: HttpsClient
  ports: { api: number; http: number; admin: number }
  /** Its log lines so far (JSON, one per line). A request's line comes after its response, and a process writes in batches: wait for a line, do not read at once. */
  output(): string
  /** A graceful stop (SIGTERM for a process); resolves once it has stopped. */
  stop(): Promise<void>
}

/** A replica in the test's process. */
export interface InProcessReplica extends ReplicaBase {
  gateway: Gateway
}

/** A replica as a process of its own (gateway/src/main.ts). */
export interface ProcessReplica extends ReplicaBase {
  process: RunningProcess
}

export type Replica = InProcessReplica | ProcessReplica

export interface ReplicaOptions {
  /** The test whose end stops the replica (and closes its client): the fixture's by default. */
  t?: Teardown
}

export interface Tenants {
  agencyId: string
  subAccountId: string
  otherSubAccountId: string
}

export interface GatewayFixture {
  db: TestDatabase
  redis: TestRedis | null
  secret: string
  ca: string
  echoPort: number
  /** A port nothing listens on: the upstream of /v1/agents/down. */
  downPort: number
  echo: RunningProcess
  keys: KeyService
  tenants: Tenants
  /** The environment every replica gets (before its own ports). */
  env: ProcessEnv
  /** A replica in this process, from `env` and `extra` as a process would get them, on ports the kernel picks (unless `extra` names them). */
  startReplica(extra?: ProcessEnv, options?: ReplicaOptions): Promise<InProcessReplica>
  /** A replica as a process, on free ports, for what only a process has: signals, exit codes, its stdout. */
  startReplicaProcess(extra?: ProcessEnv, options?: ReplicaOptions): Promise<ProcessReplica>
  /** Writes a routes file of the test's own (in the fixture's directory, gone at teardown); the path, for ROUTES_FILE. */
  routesFile(yaml: string): string
  createKey(owner: 'agency' | 'sub-account', name?: string): Promise<CreatedKey>
  /** The environment for `ctl` against the same database and Redis prefix. */
  ctlEnv: ProcessEnv
}

export interface FixtureOptions {
  /** false: no REDIS_URL (a single replica without shared cache). */
  redis?: boolean
}

export function routesYaml(echoPort: number, downPort: number): string {
  const echo = `http://127.0.0.1:${echoPort}`
  return `routes:
  - { prefix: /v1/agency, scope: AGENCY, upstream: "${echo}" }
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "${echo}" }
  - { prefix: /v1/contacts, scope: SUB-ACCOUNT, upstream: "${echo}" }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "${echo}" }
  - { prefix: /v1/agents/down, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:${downPort}" }
  - { prefix: /console, auth: session, upstream: "${echo}" }
`
}

export async function gatewayFixture(t: Test, options: FixtureOptions = {}): Promise<GatewayFixture> {
  const db = await createTestDatabase(t)
  const redis = options.redis === false ? null : await createTestRedis(t)
  const secret = randomBytes(32).toString('base64url')
  const dir = t.testdir({})
  const certificate = await makeCertificate(dir)
  const [echoPort, downPort] = [await freePort(), await freePort()]
  const echo = await startProcess(t, 'test/helpers/echo-upstream.ts', { ECHO_PORT: String(echoPort), TENANT_SIGNING_SECRET: secret }, /echo upstream ready/)
  const routesFile = join(dir, 'routes.yaml')
  writeFileSync(routesFile, routesYaml(echoPort, downPort))
  const redisEnv: ProcessEnv = redis === null ? {} : { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }
  const env: ProcessEnv = {
    DATABASE_URL: db.url,
    ...redisEnv,
    TENANT_SIGNING_SECRET: secret,
    ROUTES_FILE: routesFile,
    TLS_CERT_FILE: certificate.certFile,
    TLS_KEY_FILE: certificate.keyFile,
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_UPSTREAM_TIMEOUT_MS: '1000',
    LOG_LEVEL: 'info',
  }
  const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))
  const tenantStore = new TenantStore(db.pool)
  const agency = await tenantStore.createAgency('Acme')
  const sub = await tenantStore.createSubAccount(agency.id, 'Acme West')
  const otherSub = await tenantStore.createSubAccount(agency.id, 'Acme East')
  const tenants = { agencyId: agency.id, subAccountId: sub.id, otherSubAccountId: otherSub.id }

  return {
    db,
    redis,
    secret,
    ca: certificate.cert,
    echoPort,
    downPort,
    echo,
    keys,
    tenants,
    env,
    ctlEnv: { DATABASE_URL: db.url, ...redisEnv },
    async startReplica(extra = {}, options = {}) {
      const owner = options.t ?? t
      const running = await startInProcessGateway(owner, { ...env, ...extra })
      // Registered after the replica's teardown, so it runs first (tap runs them last in, first out): the
      // client's idle keep-alive connections are gone before the replica closes, instead of held for its grace.
      const client = httpsClient(owner, running.ports.api, certificate.cert)
      return { gateway: running.gateway, client, ports: running.ports, output: running.output, stop: running.stop }
    },
    async startReplicaProcess(extra = {}, options = {}) {
      const owner = options.t ?? t
      const ports = { api: await freePort(), http: await freePort(), admin: await freePort() }
      const process = await startProcess(
        owner,
        'gateway/src/main.ts',
        { ...env, GATEWAY_PORT: String(ports.api), GATEWAY_HTTP_PORT: String(ports.http), GATEWAY_ADMIN_PORT: String(ports.admin), ...extra },
        /gateway ready/,
      )
      return {
        process,
        client: httpsClient(owner, ports.api, certificate.cert),
        ports,
        output: () => process.output(),
        async stop() {
          await process.stop('SIGTERM')
        },
      }
    },
    routesFile(yaml) {
      const file = join(dir, `routes-${randomBytes(4).toString('hex')}.yaml`)
      writeFileSync(file, yaml)
      return file
    },
    createKey(owner, name = 'test key') {
      return keys.create(owner === 'agency' ? { scope: 'AGENCY', agencyId: agency.id } : { scope: 'SUB-ACCOUNT', subAccountId: sub.id }, name, 'test')
    },
  }
}
