/**
 * The compose `certs` job's certificates (gateway/src/internal-certificates.ts),
 * used as the deployment uses them: agency-service's files read by its own
 * TLS reader with mutual TLS, the gateway's client certificate admitted under
 * the service's name, a backend's certificate refused as a client; run again,
 * it keeps what is still valid, and renews what is near its end.
 */
import { X509Certificate } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { connect, createServer } from 'node:tls'
import type { TlsOptions } from 'node:tls'
import t from 'tap'
import { readBackendTls, withTls } from '@scoped/shared/backend-server'
import { makeInternalCertificates, parseLeaf } from '@scoped/gateway/internal-certificates'

const dir = t.testdir({})
const leaves = ['server:agency-service', 'server:resource-service', 'client:gateway'].map(parseLeaf)
const made = await makeInternalCertificates(dir, leaves)
const file = (...parts: string[]) => join(dir, ...parts)
const read = (...parts: string[]) => readFileSync(file(...parts), 'utf8')

function handshake(port: number, client: { cert: string; key: string } | undefined): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, ca: read('gateway', 'ca.crt'), servername: 'agency-service', ...client }, () => socket.write('hello'))
    socket.on('data', (chunk: Buffer) => {
      socket.destroy()
      resolve(`answered ${chunk.toString()}`)
    })
    socket.on('error', (error) => resolve(`refused: ${error.message}`))
    socket.on('close', () => resolve('refused: closed'))
  })
}

t.test('a CA, a server certificate per backend and the gateway’s client certificate, each in its own directory', async (t) => {
  t.same(made, ['ca', 'server:agency-service', 'server:resource-service', 'client:gateway'])
  for (const name of ['agency-service', 'resource-service', 'gateway']) {
    t.equal(read(name, 'ca.crt'), read('ca', 'ca.crt'), `${name} has the CA certificate`)
    t.equal(statSync(file(name, 'tls.key')).mode & 0o077, 0, `${name}'s key is readable by its owner only`)
    t.ok(new X509Certificate(read(name, 'tls.crt')).verify(new X509Certificate(read('ca', 'ca.crt')).publicKey), `${name}'s certificate is the CA's`)
  }
  t.ok(new X509Certificate(read('agency-service', 'tls.crt')).checkHost('agency-service'), 'a server certificate names its service')
})

t.test('as the deployment uses them: mutual TLS admits the gateway only', async (t) => {
  const tls = readBackendTls(
    {
      AGENCY_SERVICE_TLS_CERT_FILE: file('agency-service', 'tls.crt'),
      AGENCY_SERVICE_TLS_KEY_FILE: file('agency-service', 'tls.key'),
      AGENCY_SERVICE_TLS_CLIENT_CA_FILE: file('agency-service', 'ca.crt'),
    },
    'AGENCY_SERVICE',
  )
  const options = withTls({}, tls) as { https: TlsOptions }
  const server = createServer(options.https, (socket) => socket.end('ok'))
  const sockets = new Set<{ destroy(): void }>()
  server.on('connection', (socket) => sockets.add(socket))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const socket of sockets) socket.destroy()
    return new Promise((resolve) => server.close(resolve))
  })
  const port = (server.address() as { port: number }).port
  t.equal(await handshake(port, { cert: read('gateway', 'tls.crt'), key: read('gateway', 'tls.key') }), 'answered ok', 'the gateway')
  t.match(await handshake(port, undefined), /^refused/, 'no client certificate')
  t.match(await handshake(port, { cert: read('resource-service', 'tls.crt'), key: read('resource-service', 'tls.key') }), /^refused/, 'a backend as client')
})

t.test('run again: keeps what is valid, renews what nears its end', async (t) => {
  const before = read('gateway', 'tls.crt')
  t.same(await makeInternalCertificates(dir, leaves), [], 'nothing made')
  t.equal(read('gateway', 'tls.crt'), before, 'the same certificate')
  const late = new Date(Date.now() + 380 * 24 * 60 * 60 * 1000)
  t.same(
    await makeInternalCertificates(dir, leaves, late),
    ['server:agency-service', 'server:resource-service', 'client:gateway'],
    'leaves renewed, the CA kept',
  )
  t.throws(() => parseLeaf('server:../etc'), /not server:<name> or client:<name>/)
})
