/**
 * Start-up: configuration is validated once (a bad value stops the process
 * with one line naming it: gateway/src/main.ts as a process), and the TLS
 * listener: a certificate from files or a development certificate made under
 * .data/, TLS 1.2 or newer (a replica in the test's process).
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { connect } from 'node:tls'
import type { SecureVersion } from 'node:tls'
import { X509Certificate } from 'node:crypto'
import { ConfigError } from '@scoped/shared/config'
import { errorCatalog } from '@scoped/shared/errors'
import { readGatewayConfig, dataDir, DEFAULT_DEADLINES } from '@scoped/gateway/config'
import { developmentCertificate } from '@scoped/gateway/tls'
import { createTestDatabase } from '../helpers/database.js'
import { httpsClient } from '../helpers/https.js'
import { startInProcessGateway } from '../helpers/in-process-gateway.js'
import { freePort, runToExit } from '../helpers/processes.js'

const secret = 's'.repeat(32)

t.test('configuration: defaults', async (t) => {
  const config = readGatewayConfig({ TENANT_SIGNING_SECRET: secret })
  t.same(config.api, { host: '0.0.0.0', port: 8443 })
  t.same(config.plainHttp, { host: '0.0.0.0', port: 8080 })
  t.same(config.admin, { host: '127.0.0.1', port: 9090 })
  t.equal(config.redis, null)
  t.equal(config.tls, null)
  t.same(config.deadlines, DEFAULT_DEADLINES)
  t.same(config.connections, { max: 8192, perClient: 512 })
  t.equal(config.documentLimit, 120)
  t.same(
    readGatewayConfig({ TENANT_SIGNING_SECRET: secret, GATEWAY_MAX_CONNECTIONS: '100' }).connections,
    { max: 100, perClient: 100 },
    'a cap below the share',
  )
  t.ok(Object.isFrozen(config) && Object.isFrozen(config.api))
  const custom = readGatewayConfig({
    TENANT_SIGNING_SECRET: secret,
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: '1443',
    GATEWAY_HTTP_PORT: '1080',
    GATEWAY_ADMIN_PORT: '1090',
    GATEWAY_ADMIN_HOST: '0.0.0.0',
    REDIS_URL: 'redis://127.0.0.1:6379',
    REDIS_KEY_PREFIX: 'x:',
  })
  t.same(
    [custom.api, custom.plainHttp, custom.admin],
    [
      { host: '127.0.0.1', port: 1443 },
      { host: '127.0.0.1', port: 1080 },
      { host: '0.0.0.0', port: 1090 },
    ],
  )
  t.same(custom.redis, { url: 'redis://127.0.0.1:6379', keyPrefix: 'x:' })
})

t.test('configuration: every bad value is a ConfigError naming its variable', async (t) => {
  const dir = t.testdir({ 'cert.pem': 'not a certificate', 'key.pem': 'not a key' })
  const rows: Array<[string, Record<string, string>, string]> = [
    ['secret missing', { TENANT_SIGNING_SECRET: '' }, 'TENANT_SIGNING_SECRET'],
    ['secret too short', { TENANT_SIGNING_SECRET: 'short' }, 'TENANT_SIGNING_SECRET'],
    ['previous secret too short', { TENANT_SIGNING_SECRET_PREVIOUS: 'short' }, 'TENANT_SIGNING_SECRET_PREVIOUS'],
    ['database URL', { DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    ['Redis URL', { REDIS_URL: 'not a url' }, 'REDIS_URL'],
    ['Redis prefix', { REDIS_KEY_PREFIX: 'has space' }, 'REDIS_KEY_PREFIX'],
    ['port', { GATEWAY_PORT: '99999' }, 'GATEWAY_PORT'],
    ['http port', { GATEWAY_HTTP_PORT: 'eighty' }, 'GATEWAY_HTTP_PORT'],
    ['admin port', { GATEWAY_ADMIN_PORT: '-1' }, 'GATEWAY_ADMIN_PORT'],
    ['admin host', { GATEWAY_ADMIN_HOST: 'a b' }, 'GATEWAY_ADMIN_HOST'],
    ['log level', { LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    ['upstream timeout', { GATEWAY_UPSTREAM_TIMEOUT_MS: '0' }, 'GATEWAY_UPSTREAM_TIMEOUT_MS'],
    ['handshake timeout', { GATEWAY_HANDSHAKE_TIMEOUT_MS: '5s' }, 'GATEWAY_HANDSHAKE_TIMEOUT_MS'],
    ['drain timeout', { GATEWAY_DRAIN_TIMEOUT_MS: '0' }, 'GATEWAY_DRAIN_TIMEOUT_MS'],
    ['connection cap', { GATEWAY_MAX_CONNECTIONS: '0' }, 'GATEWAY_MAX_CONNECTIONS'],
    ['a client’s share over the cap', { GATEWAY_MAX_CONNECTIONS: '100', GATEWAY_MAX_CONNECTIONS_PER_CLIENT: '101' }, 'GATEWAY_MAX_CONNECTIONS_PER_CLIENT'],
    ['document budget', { GATEWAY_DOCUMENT_LIMIT: '-5' }, 'GATEWAY_DOCUMENT_LIMIT'],
    ['certificate without key', { TLS_CERT_FILE: `${dir}/cert.pem` }, 'TLS_KEY_FILE'],
    ['key without certificate', { TLS_KEY_FILE: `${dir}/key.pem` }, 'TLS_CERT_FILE'],
    ['certificate file missing', { TLS_CERT_FILE: `${dir}/missing.pem`, TLS_KEY_FILE: `${dir}/key.pem` }, 'TLS_CERT_FILE'],
    ['routes file missing', { ROUTES_FILE: `${dir}/missing.yaml` }, 'ROUTES_FILE'],
    ['routes file not a map', { ROUTES_FILE: `${dir}/cert.pem` }, 'ROUTES_FILE'],
  ]
  for (const [name, env, variable] of rows) {
    t.throws(() => readGatewayConfig({ TENANT_SIGNING_SECRET: secret, ...env }), { name: 'ConfigError', variable }, name)
  }
  t.type(new ConfigError('X', 'y'), Error)
})

t.test('a bad routes file stops the process with one line naming ROUTES_FILE', async (t) => {
  const dir = t.testdir({ 'routes.yaml': 'routes:\n  - { prefix: /console, scope: AGENCY, auth: session, upstream: "http://127.0.0.1:1" }\n' })
  const [badRoutes, noSecret] = await Promise.all([
    runToExit('gateway/src/main.ts', { TENANT_SIGNING_SECRET: secret, ROUTES_FILE: `${dir}/routes.yaml` }),
    runToExit('gateway/src/main.ts', {}),
  ])
  t.equal(badRoutes.status, 1)
  t.equal(badRoutes.stderr, `gateway: invalid configuration: ROUTES_FILE: ${dir}/routes.yaml: route /console: give either scope or auth: session, not both\n`)
  t.equal(noSecret.status, 1)
  t.match(
    noSecret.stderr,
    /^gateway: invalid configuration: TENANT_SIGNING_SECRET: is required \(or [A-Z_]+_SIGNING_SECRET\)\n$/,
    'without the master, nor the secret of a backend it routes to',
  )
})

t.test('the development certificate: made once under the data directory, then reused; replicas agree', async (t) => {
  const dir = t.testdir({})
  const made = await Promise.all([developmentCertificate(dir), developmentCertificate(dir), developmentCertificate(dir)])
  t.equal(new Set(made.map((credentials) => credentials.cert)).size, 1, 'concurrent starts adopt one certificate')
  t.equal((await developmentCertificate(dir)).cert, made[0]!.cert, 'reused')
  const certificate = new X509Certificate(made[0]!.cert)
  t.match(certificate.subjectAltName, /DNS:localhost/)
  t.match(certificate.subjectAltName, /IP Address:127\.0\.0\.1/)
  t.ok(certificate.checkPrivateKey((await import('node:crypto')).createPrivateKey(made[0]!.key)))
})

function tlsHandshake(port: number, ca: string, version: SecureVersion): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost', minVersion: version, maxVersion: version }, () => {
      resolve(socket.getProtocol() ?? 'none')
      socket.end()
    })
    socket.on('error', () => resolve('refused'))
  })
}

t.test('without TLS files: the development certificate under .data/, TLS 1.2 or newer, HSTS', async (t) => {
  const db = await createTestDatabase(t)
  const { ports } = await startInProcessGateway(t, { TENANT_SIGNING_SECRET: secret, DATABASE_URL: db.url, GATEWAY_HOST: '127.0.0.1' })
  const { api, admin } = ports
  const ca = readFileSync(`${dataDir}dev-tls/cert.pem`, 'utf8')
  t.equal(await tlsHandshake(api, ca, 'TLSv1.3'), 'TLSv1.3')
  t.equal(await tlsHandshake(api, ca, 'TLSv1.2'), 'TLSv1.2')
  t.equal(await tlsHandshake(api, ca, 'TLSv1.1'), 'refused')
  const response = await httpsClient(t, api, ca).request('/v1/agents')
  t.equal(response.status, 401)
  t.equal(response.json?.message, errorCatalog.missingKey.message)
  t.match(response.headers['strict-transport-security'], /^max-age=\d+; includeSubDomains$/)
  const ready = await (await fetch(`http://127.0.0.1:${admin}/readyz`)).json()
  t.match(ready, { status: 'ready', checks: { postgres: true, invalidationLog: true, routes: true } }, 'ready without Redis')
})

t.test('a start that fails half way (its operations port taken) closes what it had opened', async (t) => {
  const db = await createTestDatabase(t)
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())))
  const adminPort = (taken.address() as { port: number }).port
  const apiPort = await freePort()
  const env = {
    TENANT_SIGNING_SECRET: secret,
    DATABASE_URL: db.url,
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: String(apiPort),
    GATEWAY_ADMIN_PORT: String(adminPort),
  }
  await t.rejects(startInProcessGateway(t, env), { code: 'EADDRINUSE' }, 'the start fails on the last listener')
  // The API listener it had opened is closed again: its port can be taken.
  const again = createServer()
  await new Promise<void>((resolve, reject) => again.once('error', reject).listen(apiPort, '127.0.0.1', resolve))
  await new Promise<void>((resolve) => again.close(() => resolve()))
  const { rows } = await db.pool.query<{ connections: number }>(
    `SELECT count(*)::int AS connections FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'gateway'`,
  )
  t.equal(rows[0]!.connections, 0, 'and its Postgres connections are gone')
  const registered = await db.pool.query<{ replicas: number }>(`SELECT count(*)::int AS replicas FROM gateway_replicas`)
  t.equal(registered.rows[0]!.replicas, 0, 'and it left the replica registry')
})
