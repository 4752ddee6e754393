/**
 * A body held back across a revoke. The gateway authenticates on the
 * headers, but forwards (and signs) only once the whole body has arrived,
 * after checking the key again if anything was invalidated meanwhile: a
 * PATCH whose key is revoked (ctl, exit 0) while its body is held back gets
 * 401 when the body comes, and nothing reaches the backend. A body that
 * never completes gets 408 in the envelope after GATEWAY_BODY_TIMEOUT_MS,
 * and nothing reaches the backend either. The same when the replica holding
 * the body is paused (SIGSTOP) across the revoke, without Redis to hear of
 * it: the revoke returns once that replica has stopped being live, and on
 * resume its body is complete before any poll of the invalidation log has
 * answered; the replica knows it is no longer current and checks the key
 * again in Postgres: 401, the row unchanged.
 *
 * Through the real stack (both backends, gateways as processes) over raw
 * TLS sockets, so the test decides when each byte is sent.
 */
import { randomBytes } from 'node:crypto'
import { connect } from 'node:tls'
import t from 'tap'
import type { Pool } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import { httpsClient } from '../helpers/https.js'
import { startStack } from '../helpers/stack.js'
import { COMMAND_LIMIT_MS, createTenancy, get, REVOKED, signal, sleep, timedCtl } from './support.js'

const BODY_TIMEOUT_MS = 1_500

interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
  /** performance.now() when the first byte of the response arrived. */
  at: number
}

interface HeldRequest {
  /** Whether any byte of a response has arrived yet. */
  answered(): boolean
  /** Writes (more of) the body. */
  write(bytes: string): void
  response: Promise<RawResponse>
}

function parseResponse(text: string, at: number): RawResponse {
  const end = text.indexOf('\r\n\r\n')
  const [statusLine, ...lines] = text.slice(0, end === -1 ? text.length : end).split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  let body = end === -1 ? '' : text.slice(end + 4)
  if (headers['transfer-encoding'] === 'chunked') {
    let decoded = ''
    for (;;) {
      const lineEnd = body.indexOf('\r\n')
      const size = parseInt(body.slice(0, lineEnd), 16)
      if (!(size > 0)) break
      decoded += body.slice(lineEnd + 2, lineEnd + 2 + size)
      body = body.slice(lineEnd + 2 + size + 2)
    }
    body = decoded
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0), headers, body, at }
}

/**
 * The variant of rawHttpsRequest (helpers/https.ts) that writes the request
 * line and headers at once, and the body only when told: a client that
 * holds its body back. `Connection: close`, so the response ends with the socket.
 */
function heldRequest(port: number, ca: string, head: string): HeldRequest {
  let text = ''
  let firstByteAt = 0
  const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => socket.write(head))
  const response = new Promise<RawResponse>((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => {
      if (firstByteAt === 0) firstByteAt = performance.now()
      text += chunk.toString('utf8')
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(parseResponse(text, firstByteAt)))
  })
  return { answered: () => text.length > 0, write: (bytes) => socket.write(bytes), response }
}

function patchHead(path: string, key: string, requestId: string, contentLength: number): string {
  return (
    `PATCH ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${contentLength}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n`
  )
}

async function agent(pool: Pool, id: string): Promise<{ name: string; updatedAt: number }> {
  const { rows } = await pool.query<{ name: string; updated_at: Date }>(`SELECT name, updated_at FROM agents WHERE id = $1`, [id])
  return { name: rows[0]!.name, updatedAt: rows[0]!.updated_at.getTime() }
}

t.test('a body held back across a revoke, and a body that never completes', async (t) => {
  // Replica 1 waits long for bodies (the revoke, a process, takes seconds); replica 2 only BODY_TIMEOUT_MS.
  const stack = await startStack(t, { replicas: 1, gatewayEnv: { GATEWAY_BODY_TIMEOUT_MS: '20000' } })
  const patient = stack.replicas[0]!
  const strict = await stack.startReplica({ GATEWAY_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS) })
  const tenancy = await createTenancy(stack.db.pool, 'Held Back')
  const agents = await stack.db.pool.query<{ id: string }>(
    `INSERT INTO agents (sub_account_id, name) VALUES ($1, 'original one'), ($1, 'original two') RETURNING id`,
    [tenancy.sub.id],
  )
  const [revokedAgent, controlAgent] = agents.rows.map((row) => row.id) as [string, string]
  const reachedBackend = (requestId: string) => stack.backends.resource.output().includes(requestId)

  await t.test('the key is revoked while the body is held back: 401, and the agent is unchanged', async (t) => {
    const [doomed, kept] = [await tenancy.subKey('doomed'), await tenancy.subKey('kept')]
    const body = JSON.stringify({ name: 'renamed by a revoked key' })
    const controlBody = JSON.stringify({ name: 'renamed by a live key' })
    const ids = { doomed: `held-doomed-${randomBytes(6).toString('hex')}`, kept: `held-kept-${randomBytes(6).toString('hex')}` }
    const before = await agent(stack.db.pool, revokedAgent)

    // Both keys are accepted at the gate on their headers; then the bodies wait.
    const held = heldRequest(patient.port, stack.cert, patchHead(`/v1/agents/${revokedAgent}`, doomed.key, ids.doomed, Buffer.byteLength(body)))
    const control = heldRequest(patient.port, stack.cert, patchHead(`/v1/agents/${controlAgent}`, kept.key, ids.kept, Buffer.byteLength(controlBody)))
    await sleep(500)
    t.notOk(held.answered(), 'no answer before the body (the key was valid on the headers)')

    const revoke = await timedCtl(['key', 'revoke', doomed.id], stack.ctlEnv, stack.db)
    t.comment(`ctl key revoke while the body is held back: ${revoke.workMs} ms (${revoke.ms} ms with the process start)`)
    t.equal(revoke.status, 0, `ctl key revoke returned 0: ${revoke.stderr.trim()}`)
    t.ok(revoke.workMs < COMMAND_LIMIT_MS, `returned within ${COMMAND_LIMIT_MS} ms of starting on it (${revoke.workMs} ms)`)
    t.notOk(held.answered(), 'still no answer: the gateway waits for the body')
    t.notOk(reachedBackend(ids.doomed), 'nothing was forwarded before the body arrived')

    held.write(body)
    control.write(controlBody)
    const [response, controlResponse] = await Promise.all([held.response, control.response])
    t.equal(response.status, 401, 'the body arrived after the revoke: 401')
    t.same(JSON.parse(response.body), { success: false, message: REVOKED }, 'in the envelope')
    t.notOk(reachedBackend(ids.doomed), 'the request never reached the backend')
    t.same(await agent(stack.db.pool, revokedAgent), before, "the agent's name (and updated_at) are unchanged in the database")

    t.equal(controlResponse.status, 200, `the same wait with a key that was not revoked: 200 (${controlResponse.body})`)
    t.equal((await agent(stack.db.pool, controlAgent)).name, 'renamed by a live key')
    t.ok(reachedBackend(ids.kept), 'and that one reached the backend (so the log check above can see a request)')
  })

  await t.test('the replica holding the body is paused across the revoke: 401 on resume, and the agent is unchanged', async (t) => {
    // Postgres is its only news of a revoke: no Redis message can reach it first on resume.
    const paused = await stack.startReplica({ GATEWAY_BODY_TIMEOUT_MS: '30000', REDIS_URL: '' })
    const doomed = await tenancy.subKey('paused doomed')
    const body = JSON.stringify({ name: 'renamed by a revoked key, after a pause' })
    const id = `held-paused-${randomBytes(6).toString('hex')}`
    const before = await agent(stack.db.pool, revokedAgent)
    // Warm: the gate decides on the headers from its cache, at once.
    t.equal((await get(httpsClient(t, paused.port, stack.cert), '/v1/agents', doomed.key)).status, 200, 'the key works on that replica')

    const held = heldRequest(paused.port, stack.cert, patchHead(`/v1/agents/${revokedAgent}`, doomed.key, id, Buffer.byteLength(body)))
    await sleep(500)
    t.notOk(held.answered(), 'accepted on its headers; waiting for the body')
    signal(paused.pid, 'SIGSTOP')
    t.teardown(() => signal(paused.pid, 'SIGCONT'))
    const revoke = await timedCtl(['key', 'revoke', doomed.id], stack.ctlEnv, stack.db)
    t.comment(`ctl key revoke with a replica paused: ${revoke.workMs} ms (${revoke.ms} ms with the process start)`)
    t.equal(revoke.status, 0, `ctl key revoke returned 0 once the paused replica stopped being live: ${revoke.stderr.trim()}`)
    // The body is in the replica's socket before it runs again: it completes before any poll can answer.
    held.write(body)
    await sleep(100)
    signal(paused.pid, 'SIGCONT')
    const response = await held.response
    t.equal(response.status, 401, 'the body arrived after the revoke returned: 401')
    t.same(JSON.parse(response.body), { success: false, message: REVOKED }, 'in the envelope')
    t.notOk(reachedBackend(id), 'the request never reached the backend')
    t.same(await agent(stack.db.pool, revokedAgent), before, "the agent's name (and updated_at) are unchanged in the database")
  })

  await t.test(`a body never completed: 408 in the envelope after GATEWAY_BODY_TIMEOUT_MS (${BODY_TIMEOUT_MS} ms), nothing forwarded`, async (t) => {
    const key = await tenancy.subKey('slow client')
    const before = await agent(stack.db.pool, revokedAgent)
    const body = JSON.stringify({ name: 'never finished' })
    const cases = [
      { what: 'part of the body sent', id: `held-partial-${randomBytes(6).toString('hex')}`, sent: body.slice(0, 10) },
      { what: 'no body byte sent', id: `held-none-${randomBytes(6).toString('hex')}`, sent: '' },
    ]
    const started = performance.now()
    const requests = cases.map((c) => {
      const request = heldRequest(strict.port, stack.cert, patchHead(`/v1/agents/${revokedAgent}`, key.key, c.id, Buffer.byteLength(body)))
      if (c.sent !== '') setTimeout(() => request.write(c.sent), 100)
      return request
    })
    for (const [i, request] of requests.entries()) {
      const response = await request.response
      const after = Math.round(response.at - started)
      t.comment(`${cases[i]!.what}: ${response.status} after ${after} ms`)
      t.equal(response.status, 408, `${cases[i]!.what}: 408`)
      t.same(JSON.parse(response.body), { success: false, message: errorCatalog.requestTimeout.message }, 'in the envelope')
      t.equal(response.headers['connection'], 'close', 'and the connection is closed')
      t.ok(after >= BODY_TIMEOUT_MS - 100, `not before the body deadline (${after} ms)`)
      t.ok(after < BODY_TIMEOUT_MS + 3_000, `soon after the body deadline (${after} ms)`)
      t.notOk(reachedBackend(cases[i]!.id), 'nothing reached the backend')
    }
    t.same(await agent(stack.db.pool, revokedAgent), before, 'the agent is unchanged')
  })
})
