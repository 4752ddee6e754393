/**
 * SSRF attacks on the webhook sender's outbound requests, each against a
 * real listener on 127.0.0.1 that counts the connections it gets: a literal
 * loopback address, host names that resolve to loopback, a private address,
 * an IPv4-mapped IPv6 address, or a mix with a public one, and a DNS answer
 * that changes between a check and the connect. Each is refused without a
 * connection. Redirects are not followed, a response body is read no further
 * than 4 KiB, and a silent receiver meets the deadline. With the
 * development flag, a delivery over HTTPS (a test CA) verifies.
 */
import { createServer as createTcpServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import { createServer as createHttpServer } from 'node:http'
import type { LookupAddress } from 'node:dns'
import t from 'tap'
import type { Test } from 'tap'
import { Webhook } from 'standardwebhooks'
import { createOutboundAgent, postWebhook } from '@scoped/agency-service/webhooks/outbound'
import type { Resolver } from '@scoped/agency-service/webhooks/outbound'
import { newEndpointSecret, signedHeaders } from '@scoped/agency-service/webhooks/signing'
import { issueCertificate, makeCa } from '../helpers/tls-ca.js'
import { startWebhookReceiver } from '../helpers/webhook-receiver.js'
import { waitFor } from '../helpers/wait-for.js'

/** A TCP listener on 127.0.0.1 that answers nothing and counts connections. */
async function countingListener(t: Test): Promise<{ port: number; connections: () => number }> {
  let connections = 0
  const server = createTcpServer((socket) => {
    connections++
    socket.destroy()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { port: (server.address() as AddressInfo).port, connections: () => connections }
}

function resolverOf(...answers: LookupAddress[][]): Resolver & { calls: number } {
  const resolver = Object.assign(
    async (): Promise<LookupAddress[]> => {
      const answer = answers[Math.min(resolver.calls, answers.length - 1)]!
      resolver.calls++
      return answer
    },
    { calls: 0 },
  )
  return resolver
}

const v4 = (address: string): LookupAddress => ({ address, family: 4 })
const v6 = (address: string): LookupAddress => ({ address, family: 6 })
const PUBLIC = v4('93.184.216.34')
const body = '{"type":"key.created"}'

t.test('refused before any connection: loopback, private, IPv4-mapped, and mixed answers', async (t) => {
  const listener = await countingListener(t)
  const cases: Array<[string, string, Resolver | undefined]> = [
    ['a literal loopback address', `https://127.0.0.1:${listener.port}/in`, undefined],
    ['a literal IPv6 loopback address', `https://[::1]:${listener.port}/in`, undefined],
    ['a literal IPv4-mapped loopback address', `https://[::ffff:127.0.0.1]:${listener.port}/in`, undefined],
    ['a name that resolves to loopback', `https://hooks.example.test:${listener.port}/in`, resolverOf([v4('127.0.0.1')])],
    ['a name that resolves to a private address', `https://hooks.example.test:${listener.port}/in`, resolverOf([v4('10.0.0.5')])],
    ['a name that resolves to the metadata address', `https://hooks.example.test:${listener.port}/in`, resolverOf([v4('169.254.169.254')])],
    ['a name that resolves to an IPv4-mapped loopback address', `https://hooks.example.test:${listener.port}/in`, resolverOf([v6('::ffff:127.0.0.1')])],
    ['a name whose answers mix a public and a loopback address', `https://hooks.example.test:${listener.port}/in`, resolverOf([PUBLIC, v4('127.0.0.1')])],
  ]
  for (const [name, url, resolver] of cases) {
    const agent = createOutboundAgent({ allowPrivateAddresses: false, ...(resolver === undefined ? {} : { resolver }) })
    const outcome = await postWebhook(agent, url, {}, body, 5_000)
    await agent.close()
    t.equal(outcome.status, null, `${name}: no answer`)
    t.match(outcome.error, /not a public address/, `${name}: refused as not public`)
  }
  t.equal(listener.connections(), 0, 'the listener was never connected to')
})

t.test('a DNS answer that changes between the check and the connect gains nothing', async (t) => {
  const listener = await countingListener(t)
  // Public when someone checks, loopback when the connection resolves: the rebinding attack.
  const rebinding = resolverOf([PUBLIC], [v4('127.0.0.1')])
  const checked = await rebinding('hooks.example.test')
  t.same(checked, [PUBLIC], 'a check would have seen a public address')
  const agent = createOutboundAgent({ allowPrivateAddresses: false, resolver: rebinding })
  t.teardown(() => agent.close())
  const outcome = await postWebhook(agent, `https://hooks.example.test:${listener.port}/in`, {}, body, 5_000)
  t.match(outcome.error, /not a public address/, 'the address the connection resolved is the one checked, and refused')
  t.equal(rebinding.calls, 2, 'the connection resolved the name itself')
  t.equal(listener.connections(), 0, 'never connected')
})

t.test('redirects are not followed', async (t) => {
  const target = await startWebhookReceiver(t)
  const redirecting = createHttpServer((_request, response) => response.writeHead(307, { location: target.url }).end())
  await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => redirecting.close(() => resolve())))
  const agent = createOutboundAgent({ allowPrivateAddresses: true })
  t.teardown(() => agent.close())
  const outcome = await postWebhook(agent, `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/in`, {}, body, 5_000)
  t.same([outcome.status, outcome.error], [307, 'answered 307'], 'a redirect is a failed attempt')
  t.equal(target.received.length, 0, 'the redirect target got nothing')
})

t.test('a response body is read no further than 4 KiB, and a silent receiver meets the deadline', async (t) => {
  let closed = false
  const endless = createHttpServer((request, response) => {
    if (request.url === '/silent') return
    response.writeHead(200)
    const chunk = Buffer.alloc(1024, 'x')
    const write = (): void => {
      while (response.write(chunk));
      response.once('drain', write)
    }
    write()
    request.socket.on('close', () => (closed = true))
  })
  await new Promise<void>((resolve) => endless.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    endless.closeAllConnections()
    return new Promise<void>((resolve) => endless.close(() => resolve()))
  })
  const base = `http://127.0.0.1:${(endless.address() as AddressInfo).port}`
  const agent = createOutboundAgent({ allowPrivateAddresses: true })
  t.teardown(() => agent.close())
  // A deadline far beyond the test's timeout: only stopping at 4 KiB lets this answer.
  const outcome = await postWebhook(agent, `${base}/endless`, {}, body, 600_000)
  t.same([outcome.status, outcome.error], [200, null], 'answered 2xx')
  await waitFor(() => closed, 'the endless response dropped')
  const silent = await postWebhook(agent, `${base}/silent`, {}, body, 200)
  t.same([silent.status, silent.error], [null, 'no answer within 200 ms'])
})

t.test('over HTTPS (a test CA, with the development flag), the signature verifies', async (t) => {
  const dir = t.testdir({})
  const ca = await makeCa(dir)
  const certificate = await issueCertificate(ca, dir, 'receiver', { usage: 'server', names: ['localhost'] })
  const receiver = await startWebhookReceiver(t, { cert: certificate.cert, key: certificate.key })
  const agent = createOutboundAgent({ allowPrivateAddresses: true, ca: ca.cert })
  t.teardown(() => agent.close())
  const secret = newEndpointSecret()
  const url = receiver.url.replace('127.0.0.1', 'localhost')
  const outcome = await postWebhook(agent, url, signedHeaders(secret, 'msg_1', new Date(), body), body, 5_000)
  t.same([outcome.status, outcome.error], [200, null])
  const received = receiver.received[0]!
  t.same(new Webhook(secret).verify(received.body, received.headers), JSON.parse(body), 'verified by the Standard Webhooks library')
  t.throws(() => new Webhook(newEndpointSecret()).verify(received.body, received.headers), 'and not under another secret')
})
