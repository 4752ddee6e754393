/**
 * Every connection ends, against gateway replicas as processes (their
 * descriptors are counted in /proc/<pid>/fd) and in this process (for the
 * caps and their metrics): connections that send nothing, a 5-byte TLS record
 * header, half a handshake, a request that never completes, and clients that
 * hang up or vanish mid-way. The TLS handshake has its own deadline, every
 * connection given up on is destroyed (the descriptor count comes back to
 * where it was), no client can take more than its share of the listener's
 * connections, and SIGTERM ends the process within its drain bound with such
 * connections still open, on all three listeners.
 */
import t from 'tap'
import { readdirSync } from 'node:fs'
import { createServer, connect as tcpConnect } from 'node:net'
import type { Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { httpsClient } from '../helpers/https.js'
import { waitFor } from '../helpers/wait-for.js'
import { gatewayFixture } from './fixture.js'

const fixture = await gatewayFixture(t)
const subKey = await fixture.createKey('sub-account', 'sub key')
const bearer = { authorization: `Bearer ${subKey.key}` }

/** Descriptors the process holds now. */
function descriptors(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length
}

/** A ClientHello as a real TLS client sends it: the first bytes of a handshake, captured at a listener of our own. */
async function clientHello(): Promise<Buffer> {
  const server = createServer()
  const hello = new Promise<Buffer>((resolve) => server.once('connection', (socket) => socket.once('data', resolve)))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  const client = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false })
  client.on('error', () => undefined)
  const bytes = await hello
  client.destroy()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return bytes
}

/** A TCP connection from `localAddress` (any 127.0.0.0/8 address reaches the loopback listener), once it is open. */
function open(port: number, localAddress = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect({ host: '127.0.0.1', port, localAddress }, () => resolve(socket))
    socket.once('error', reject)
  })
}

/** Settles once the connection has ended (the gateway closed or reset it), reading and dropping whatever comes first. */
function closed(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.destroyed) return resolve()
    socket.on('error', () => undefined)
    socket.once('close', () => resolve())
    socket.once('end', () => resolve())
    socket.resume()
  })
}

/** The highest descriptor count of `pid` seen until stop() is called. */
function peakDescriptors(pid: number): { stop(): number } {
  let peak = descriptors(pid)
  const sampler = setInterval(() => (peak = Math.max(peak, descriptors(pid))), 10)
  return {
    stop() {
      clearInterval(sampler)
      return peak
    },
  }
}

interface Hostile {
  sockets: Socket[]
  destroy(): void
}

/**
 * Clients that hold the API listener without ever finishing a request: silent connections, a 5-byte TLS
 * record header, a whole ClientHello and then nothing (half a handshake), a finished handshake and half
 * a request head, and each kind once more from a client that hangs up or resets mid-way.
 */
async function holdApi(port: number, hello: Buffer, each: number): Promise<Hostile> {
  const sockets: Socket[] = []
  const add = (socket: Socket): Socket => {
    socket.on('error', () => undefined)
    sockets.push(socket)
    return socket
  }
  for (let i = 0; i < each; i++) {
    add(await open(port))
    add(await open(port)).write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]))
    add(await open(port)).write(hello)
    const tls = add(await secure(port))
    tls.write('GET /v1/agents HTTP/1.1\r\nHost: localhost\r\n')
    const hangsUp = add(await open(port))
    hangsUp.end(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]))
    const resets = add(await open(port))
    resets.write(hello.subarray(0, 20))
    resets.resetAndDestroy()
  }
  return { sockets, destroy: () => sockets.forEach((socket) => socket.destroy()) }
}

/** A finished TLS handshake with the gateway's certificate. */
function secure(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: fixture.ca, servername: 'localhost' }, () => resolve(socket))
    socket.once('error', reject)
  })
}

/** One request on a connection of its own, closed before this answers: nothing of the test's stays open at the gateway. */
async function status(port: number, path: string, headers: Record<string, string> = {}): Promise<number> {
  const client = httpsClient({ teardown: () => undefined }, port, fixture.ca)
  try {
    return (await client.request(path, { headers })).status
  } finally {
    await client.close()
  }
}

async function metric(adminPort: number, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text()
  return Number(pattern.exec(text)?.[1] ?? Number.NaN)
}

function openConnections(adminPort: number, listener: 'api' | 'http' | 'admin'): Promise<number> {
  return metric(adminPort, new RegExp(`^gateway_connections_open\\{listener="${listener}"\\} (\\d+)`, 'm'))
}

function refusedConnections(adminPort: number, reason: 'cap' | 'per-client'): Promise<number> {
  return metric(adminPort, new RegExp(`^gateway_connections_refused_total\\{listener="api",reason="${reason}"\\} (\\d+)`, 'm'))
}

t.test('connections that never finish a handshake or a request are destroyed: the descriptor count comes back to its baseline', async (t) => {
  const replica = await fixture.startReplicaProcess(
    { GATEWAY_HANDSHAKE_TIMEOUT_MS: '1000', GATEWAY_HEADERS_TIMEOUT_MS: '1000', GATEWAY_REQUEST_TIMEOUT_MS: '2000' },
    { t },
  )
  const pid = replica.process.pid
  t.equal(await status(replica.ports.api, '/v1/agents', bearer), 200, 'warm: its pools and upstream connection are open')
  const hello = await clientHello()
  const baseline = descriptors(pid)
  const peak = peakDescriptors(pid)
  const hostile = await holdApi(replica.ports.api, hello, 10)
  t.teardown(() => hostile.destroy())
  // Every kind ends from the gateway's side, while its client still holds it open.
  let ended = 0
  hostile.sockets.forEach((socket) => void closed(socket).then(() => ended++))
  await waitFor(() => ended === hostile.sockets.length, 'the gateway to close every held connection')
  await waitFor(() => descriptors(pid) <= baseline, `the descriptor count to come back to ${baseline}`)
  const highest = peak.stop()
  t.ok(highest >= baseline + 10, `the connections were held meanwhile (${highest} descriptors at the most)`)
  t.pass(`back to ${descriptors(pid)} descriptors (baseline ${baseline})`)
  t.equal(await openConnections(replica.ports.admin, 'api'), 0, 'no API connection left open')
  t.equal(await status(replica.ports.api, '/v1/agents', bearer), 200, 'and a valid request is served as before')
})

t.test('a client that stops reading its answer is cut once nothing has moved for the request and upstream deadlines', async (t) => {
  const replica = await fixture.startReplicaProcess(
    { GATEWAY_HEADERS_TIMEOUT_MS: '1000', GATEWAY_REQUEST_TIMEOUT_MS: '1000', GATEWAY_UPSTREAM_TIMEOUT_MS: '1000' },
    { t },
  )
  const pid = replica.process.pid
  const page = httpsClient({ teardown: () => undefined }, replica.ports.api, fixture.ca)
  const bundle = /src="(\/docs\/swagger-ui-bundle\.[^"]+)"/.exec((await page.request('/docs')).text)![1]!
  await page.close()
  const baseline = descriptors(pid)
  const reader = await secure(replica.ports.api)
  reader.on('error', () => undefined)
  t.teardown(() => reader.destroy())
  // Twenty uncompressed bundles in a row are far more than the socket buffers hold: the answers stall once they are full.
  reader.write(`GET ${bundle} HTTP/1.1\r\nHost: localhost\r\n\r\n`.repeat(20))
  reader.pause()
  // Its descriptor goes once the gateway cuts it (the paused client never learns of it).
  await waitFor(() => descriptors(pid) <= baseline, `the descriptor count to come back to ${baseline}`)
  t.pass('the stalled connection was cut')
})

t.test('SIGTERM ends the process within its drain bound while every listener is held', async (t) => {
  const drainMs = 2_000
  const replica = await fixture.startReplicaProcess(
    {
      // Long enough that no client deadline ends a held connection before the drain does.
      GATEWAY_HANDSHAKE_TIMEOUT_MS: '120000',
      GATEWAY_HEADERS_TIMEOUT_MS: '120000',
      GATEWAY_BODY_TIMEOUT_MS: '120000',
      GATEWAY_REQUEST_TIMEOUT_MS: '120000',
      GATEWAY_DRAIN_TIMEOUT_MS: String(drainMs),
    },
    { t },
  )
  const hostile = await holdApi(replica.ports.api, await clientHello(), 3)
  t.teardown(() => hostile.destroy())
  // A request whose body never completes: in flight, so only the drain deadline ends it.
  const body = await secure(replica.ports.api)
  body.on('error', () => undefined)
  body.write(
    `POST /v1/contacts HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${subKey.key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`,
  )
  const plain = [await open(replica.ports.http), await open(replica.ports.http)]
  plain[1]!.write('GET / HTTP/1.1\r\nHost: localhost\r\n')
  const admin = [await open(replica.ports.admin), await open(replica.ports.admin)]
  admin[1]!.write('GET /metrics HTTP/1.1\r\nHost: localhost\r\n')
  const held = [...hostile.sockets, body, ...plain, ...admin]
  t.teardown(() => held.forEach((socket) => socket.destroy()))
  await waitFor(
    async () =>
      (await openConnections(replica.ports.admin, 'api')) >= 13 &&
      (await openConnections(replica.ports.admin, 'http')) >= 2 &&
      (await openConnections(replica.ports.admin, 'admin')) >= 3,
    'the held connections to reach every listener',
  )

  const started = performance.now()
  replica.process.child.kill('SIGTERM')
  // The bound: the drain deadline and the 5 s stop margin; the rest is room for a busy machine, far below any client deadline.
  const code = await Promise.race([
    replica.process.exited,
    new Promise<string>((resolve) => setTimeout(() => resolve('still running'), drainMs + 5_000 + 8_000)),
  ])
  const elapsed = performance.now() - started
  t.equal(code, 0, `exited cleanly after ${elapsed.toFixed(0)} ms, not cut short by its own stop bound`)
  t.match(replica.output(), /in-flight requests did not finish in time/, 'the held request was cut at the drain deadline')
})

t.test('the connection caps: one client cannot take the listener, a trusted proxy is not a client, and both are counted', async (t) => {
  const replica = await fixture.startReplica({
    GATEWAY_HANDSHAKE_TIMEOUT_MS: '60000',
    GATEWAY_MAX_CONNECTIONS: '30',
    GATEWAY_MAX_CONNECTIONS_PER_CLIENT: '10',
    GATEWAY_TRUSTED_PROXIES: '127.0.0.3',
  })
  const held: Socket[] = []
  t.teardown(() => held.forEach((socket) => socket.destroy()))
  const hold = async (from: string, count: number): Promise<Socket[]> => {
    const sockets = await Promise.all(Array.from({ length: count }, () => open(replica.ports.api, from)))
    sockets.forEach((socket) => socket.on('error', () => undefined))
    held.push(...sockets)
    return sockets
  }
  const attacker = await hold('127.0.0.2', 15)
  await waitFor(async () => (await refusedConnections(replica.ports.admin, 'per-client')) === 5, 'the five over the share to be refused')
  await Promise.all(attacker.slice(10).map(closed))
  t.notOk(
    attacker.slice(0, 10).some((socket) => socket.destroyed),
    'the attacker keeps its share',
  )
  t.equal(await status(replica.ports.api, '/v1/agents', bearer), 200, 'a bystander is served')

  const proxy = await hold('127.0.0.3', 15)
  await waitFor(async () => (await openConnections(replica.ports.admin, 'api')) === 25, 'the proxy to hold 15 and the attacker 10')
  t.notOk(
    proxy.some((socket) => socket.destroyed),
    'a trusted proxy holds more than a client’s share',
  )
  await hold('127.0.0.4', 5)
  const past = await open(replica.ports.api, '127.0.0.5')
  await closed(past)
  await waitFor(async () => (await refusedConnections(replica.ports.admin, 'cap')) === 1, 'the one past the cap to be counted')
  t.equal(await openConnections(replica.ports.admin, 'api'), 30, 'the listener is at its cap')

  held.splice(0).forEach((socket) => socket.destroy())
  await waitFor(async () => (await openConnections(replica.ports.admin, 'api')) === 0, 'the connections to be gone')
  t.equal(await status(replica.ports.api, '/v1/agents', bearer), 200, 'once they are gone, everyone is served again')
})

t.test('the plain-HTTP listener cuts a connection that sends nothing at its header deadline', async (t) => {
  const replica = await fixture.startReplicaProcess({ GATEWAY_HEADERS_TIMEOUT_MS: '1000' }, { t })
  const pid = replica.process.pid
  const baseline = descriptors(pid)
  const sockets = [await open(replica.ports.http), await open(replica.ports.http), await open(replica.ports.admin), await open(replica.ports.admin)]
  sockets[1]!.write('GET / HTTP/1.1\r\nHost: localhost\r\n')
  sockets[3]!.write('GET /metrics HTTP/1.1\r\nHost: localhost\r\n')
  t.teardown(() => sockets.forEach((socket) => socket.destroy()))
  await Promise.all(sockets.map(closed))
  await waitFor(() => descriptors(pid) <= baseline, `the descriptor count to come back to ${baseline}`)
  t.pass('both listeners cut them')
})
