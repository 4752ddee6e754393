/**
 * The whole stack as processes for end-to-end tests: agency-service and
 * resource-service, and one or more gateway replicas over HTTPS with a
 * throw-away certificate and a route map pointing at those services, all on
 * one test database and one test Redis prefix.
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
import { freePort, startProcess } from './processes.js'

const STARTUP_MS = 60_000

export interface Stack {
  db: TestDatabase
  /** The HTTPS API port of each gateway replica. */
  gatewayPorts: number[]
  /** The PEM certificate the gateways present (for localhost and 127.0.0.1). */
  cert: string
}

export async function startStack(t: Test, gatewayReplicas = 1): Promise<Stack> {
  const db = await createTestDatabase(t)
  const redis = await createTestRedis(t)
  const dir = mkdtempSync(join(tmpdir(), 'stack-e2e-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const tls = await makeCertificate(dir)
  const [agencyPort, resourcePort] = [await freePort(), await freePort()]
  const routesFile = join(dir, 'routes.yaml')
  writeFileSync(
    routesFile,
    `routes:
  - { prefix: /v1/agency, scope: AGENCY, upstream: "http://127.0.0.1:${agencyPort}" }
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:${resourcePort}" }
  - { prefix: /v1/contacts, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:${resourcePort}" }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:${resourcePort}" }
  - { prefix: /console, auth: session, upstream: "http://127.0.0.1:${agencyPort}" }
`,
  )
  const common = {
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: redis.prefix,
    TENANT_SIGNING_SECRET: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'info',
  }
  await Promise.all([
    startProcess(t, 'agency-service/src/main.ts', { ...common, AGENCY_SERVICE_PORT: String(agencyPort) }, /agency-service ready/, STARTUP_MS),
    startProcess(t, 'resource-service/src/main.ts', { ...common, RESOURCE_SERVICE_PORT: String(resourcePort) }, /resource-service ready/, STARTUP_MS),
  ])
  const gatewayPorts: number[] = []
  for (let i = 0; i < gatewayReplicas; i++) {
    const [api, http, admin] = [await freePort(), await freePort(), await freePort()]
    await startProcess(
      t,
      'gateway/src/main.ts',
      {
        ...common,
        GATEWAY_HOST: '127.0.0.1',
        GATEWAY_PORT: String(api),
        GATEWAY_HTTP_PORT: String(http),
        GATEWAY_ADMIN_PORT: String(admin),
        TLS_CERT_FILE: tls.certFile,
        TLS_KEY_FILE: tls.keyFile,
        ROUTES_FILE: routesFile,
      },
      /gateway ready/,
      STARTUP_MS,
    )
    gatewayPorts.push(api)
  }
  return { db, gatewayPorts, cert: tls.cert }
}
