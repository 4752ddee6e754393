/**
 * TLS on both hops, with the real processes. The backends listen with
 * mutual TLS (AGENCY_SERVICE_TLS_* / RESOURCE_SERVICE_TLS_*, a certificate of
 * a throw-away CA, and only client certificates of that CA admitted) and the
 * gateway reaches them over https:// upstreams that name that CA
 * (`tls.caFile`) and its client certificate: API routes of both backends and
 * the console work; a client without the gateway's certificate gets no
 * answer from a backend, nor one offering only suites without forward
 * secrecy; a gateway told to trust another CA, or to expect another name, gets
 * nothing through (502), and a request refused so holds nothing. And
 * the API listener itself: on TLS 1.2 a client offering only CBC-SHA1 suites
 * or suites without ECDHE fails the handshake, one offering ECDHE with GCM or
 * ChaCha20-Poly1305 succeeds (while a default Node server accepts them all).
 */
import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { connect, createServer } from 'node:tls'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { httpsClient } from '../helpers/https.js'
import { startStack } from '../helpers/stack.js'
import { issueCertificate, makeCa } from '../helpers/tls-ca.js'

const stack = await startStack(t, { backendTls: true })
const tenants = new TenantStore(stack.db.pool)
const agency = await tenants.createAgency('Encrypted')
const sub = await tenants.createSubAccount(agency.id, 'Encrypted West')
const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: agency.id }, 'agency', 'test')
const subKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'sub', 'test')
const dir = t.testdir({})

t.test('the gateway forwards to both backends over TLS, verified against the route CA', async (t) => {
  const api = httpsClient(t, stack.gatewayPorts[0]!, stack.cert, { openapi: true })
  t.equal((await api.request('/v1/agency', { headers: { 'x-api-key': agencyKey.key } })).status, 200, 'agency-service over https')
  const created = await api.request('/v1/agents', {
    method: 'POST',
    headers: { 'x-api-key': subKey.key, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Ada' }),
  })
  t.equal(created.status, 201, 'resource-service over https, with a body')
  t.equal((await api.request('/v1/agents', { headers: { 'x-api-key': subKey.key } })).json.data.length, 1)
  const console = await api.request('/console/sign-in')
  t.equal(console.status, 200, 'the console over https')
  t.match(console.text, /<form method="post"/)

  await t.rejects(fetch(`http://127.0.0.1:${stack.backends.resourcePort}/healthz`), 'the backends do not answer plain HTTP')
})

/** GET /healthz on a backend over TLS, presenting `client` (or no certificate): the answer, or the handshake's error. */
function directRequest(port: number, client?: { cert: string; key: string }, ciphers?: string): Promise<{ text?: string; error?: string }> {
  return new Promise((resolve) => {
    const tls12 = ciphers === undefined ? {} : { maxVersion: 'TLSv1.2' as const, ciphers: `${ciphers}:@SECLEVEL=0` }
    const socket = connect({ host: '127.0.0.1', port, ca: readCa(), servername: 'localhost', ...client, ...tls12 }, () =>
      socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'),
    )
    let text = ''
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()))
    // TLS 1.3 finishes the client's side of the handshake before the server has checked its certificate: the refusal comes as an error then.
    socket.on('error', (error) => resolve({ error: error.message }))
    socket.on('close', () => resolve(text === '' ? { error: 'closed without an answer' } : { text }))
  })
}

t.test('mutual TLS: a backend serves only a client with the gateway’s certificate', async (t) => {
  const internal = stack.internalTls!
  for (const port of [stack.backends.agencyPort, stack.backends.resourcePort]) {
    const anonymous = await directRequest(port)
    t.notOk(anonymous.text, `${port}: no client certificate, no answer (${anonymous.error ?? anonymous.text})`)
    const backendAsClient = await directRequest(port, internal.backend)
    t.notOk(
      backendAsClient.text,
      `${port}: a backend's own certificate (same CA, server use only) is refused (${backendAsClient.error ?? backendAsClient.text})`,
    )
    const stranger = await makeCa(dir, `stranger-client-ca-${port}`)
    const strangerClient = await issueCertificate(stranger, dir, `stranger-client-${port}`, { usage: 'client' })
    const foreign = await directRequest(port, strangerClient)
    t.notOk(foreign.text, `${port}: a client certificate of another CA is refused (${foreign.error ?? foreign.text})`)
    const gateway = await directRequest(port, internal.gatewayClient)
    t.match(gateway.text ?? gateway.error, /^HTTP\/1\.1 200/, `${port}: the gateway's client certificate is served`)
  }
  // The probes that cannot present it use the health listener: plain HTTP, /healthz and /readyz only.
  for (const port of [internal.agencyHealthPort, internal.resourceHealthPort]) {
    t.equal((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 200, `${port}: /readyz on the health listener`)
    t.equal((await fetch(`http://127.0.0.1:${port}/v1/agents`)).status, 404, `${port}: and nothing else`)
  }
})

function readCa(): string {
  return stack.backendCaFile === undefined ? '' : readFileSync(stack.backendCaFile, 'utf8')
}

t.test('a gateway that trusts another CA reaches no backend (502), never forwards unverified', async (t) => {
  const stranger = await makeCa(dir, 'stranger-ca')
  const routes = join(dir, 'routes-stranger.yaml')
  writeFileSync(
    routes,
    `routes:
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "https://127.0.0.1:${stack.backends.resourcePort}", tls: { caFile: "${stranger.certFile}" } }
  - { prefix: /console, auth: session, upstream: "https://127.0.0.1:${stack.backends.agencyPort}", tls: { caFile: "${stranger.certFile}" } }
`,
  )
  const replica = await stack.startReplica({ ROUTES_FILE: routes })
  const api = httpsClient(t, replica.port, stack.cert, { openapi: true })
  t.equal((await api.request('/v1/agents', { headers: { 'x-api-key': subKey.key } })).status, 502)
  t.equal((await api.request('/console/sign-in')).status, 502)
})

t.test('a backend whose certificate names another host: every request 502, none holds a connection, and the replica still stops', async (t) => {
  // Right CA, wrong name: undici's Client would count such a request as running for ever and never send
  // another (upstream.ts drops the connection instead). One connection and one waiting place: a request stuck
  // on either would turn the next ones into 503s or leave them hanging, and keep the replica from closing.
  const routes = join(dir, 'routes-misnamed.yaml')
  writeFileSync(
    routes,
    `routes:
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "https://127.0.0.1:${stack.backends.resourcePort}", tls: { caFile: "${stack.backendCaFile!}", serverName: "elsewhere.example" } }
`,
  )
  const replica = await stack.startReplica({ ROUTES_FILE: routes, GATEWAY_UPSTREAM_CONNECTIONS: '1', GATEWAY_UPSTREAM_QUEUE: '1' })
  const api = httpsClient(t, replica.port, stack.cert, { openapi: true })
  const get = async (): Promise<number> => (await api.request('/v1/agents', { headers: { 'x-api-key': subKey.key } })).status
  for (let i = 0; i < 4; i++) t.equal(await get(), 502, `request ${i + 1}, one at a time: 502`)
  const together = await Promise.all(Array.from({ length: 8 }, get))
  t.ok(
    together.every((status) => status === 502 || status === 503),
    `eight at once: 502, or 503 past the connection and its queue (${together.join(' ')})`,
  )
  t.equal(await get(), 502, 'and then one more: 502, not 503 (nothing left holding the connection or its queue)')
  t.equal(await replica.stop('SIGTERM'), 0, 'the replica stops cleanly (its upstream connections close)')
})

interface Handshake {
  ok: boolean
  cipher?: string
  error?: string
}

/** A TLS 1.2 handshake offering exactly `ciphers` (security level 0 on the client, so only the server can refuse). */
function handshake(port: number, ca: string, ciphers: string): Promise<Handshake> {
  return new Promise((resolve) => {
    const socket = connect(
      { host: '127.0.0.1', port, ca, servername: 'localhost', minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: `${ciphers}:@SECLEVEL=0` },
      () => {
        const cipher = socket.getCipher().standardName
        socket.destroy()
        resolve({ ok: true, cipher })
      },
    )
    socket.on('error', (error) => resolve({ ok: false, error: error.message }))
  })
}

const WEAK_ECDSA = ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA']
const WEAK_RSA = [
  'ECDHE-RSA-AES128-SHA',
  'ECDHE-RSA-AES256-SHA',
  'AES128-GCM-SHA256',
  'AES256-GCM-SHA384',
  'AES128-SHA',
  'DHE-RSA-AES128-GCM-SHA256',
  'DHE-RSA-AES256-GCM-SHA384',
]
const STRONG_RSA = ['ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-RSA-CHACHA20-POLY1305']

t.test('the API listener: on TLS 1.2 only forward-secret AEAD suites complete a handshake', async (t) => {
  // The stack's certificate is ECDSA (P-256).
  for (const suite of WEAK_ECDSA) t.notOk((await handshake(stack.gatewayPorts[0]!, stack.cert, suite)).ok, `${suite} (CBC, SHA-1) is refused`)
  const ecdsa = await handshake(stack.gatewayPorts[0]!, stack.cert, 'ECDHE-ECDSA-AES128-GCM-SHA256')
  t.ok(ecdsa.ok, `ECDHE-ECDSA-AES128-GCM-SHA256 is accepted (${ecdsa.error ?? ecdsa.cipher})`)

  // An RSA certificate, so that suites without ECDHE (static RSA, DHE) could be chosen at all.
  const ca = await makeCa(dir, 'listener-ca', 'rsa')
  const rsa = await issueCertificate(ca, dir, 'listener-rsa', { usage: 'server', keyType: 'rsa' })
  const replica = await stack.startReplica({ TLS_CERT_FILE: rsa.certFile, TLS_KEY_FILE: rsa.keyFile })
  for (const suite of WEAK_RSA) {
    const result = await handshake(replica.port, ca.cert, suite)
    t.notOk(result.ok, `${suite} is refused${result.ok ? ` (negotiated ${result.cipher})` : ''}`)
  }
  for (const suite of STRONG_RSA) {
    const result = await handshake(replica.port, ca.cert, suite)
    t.ok(result.ok, `${suite} is accepted${result.ok ? '' : ` (${result.error})`}`)
  }

  // The control: a TLS server with Node's defaults and the same certificate accepts the suites the gateway refuses.
  const plain = createServer({ cert: rsa.cert, key: rsa.key }, (socket) => socket.end())
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => plain.close(resolve)))
  const port = (plain.address() as { port: number }).port
  for (const suite of ['ECDHE-RSA-AES128-SHA', 'AES128-GCM-SHA256'])
    t.ok((await handshake(port, ca.cert, suite)).ok, `control: Node's defaults accept ${suite}`)
})

t.test('a backend: on TLS 1.2 a client offering only suites without forward secrecy fails the handshake', async (t) => {
  const client = stack.internalTls!.gatewayClient
  for (const port of [stack.backends.agencyPort, stack.backends.resourcePort]) {
    for (const suite of WEAK_ECDSA) {
      const result = await directRequest(port, client, suite)
      t.notOk(result.text, `${port}: ${suite} is refused (${result.error ?? result.text})`)
    }
    const strong = await directRequest(port, client, 'ECDHE-ECDSA-AES128-GCM-SHA256')
    t.match(strong.text ?? strong.error, /^HTTP\/1\.1 200/, `${port}: ECDHE-ECDSA-AES128-GCM-SHA256 is served`)
  }
})
