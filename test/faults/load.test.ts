/**
 * The proof under load. Two gateway replicas in front of the real backends
 * (startStack), 3 agencies with 3 sub-accounts each, every sub-account with
 * an agent named after it. CLIENTS concurrent clients, each with keep-alive
 * HTTPS connections to both replicas (and an address of its own, 127.0.0.x,
 * as distinct clients would have), ask GET /v1/agents (sub-account keys) or
 * GET /v1/agency (agency keys) alternately on each replica for LOAD_SECONDS,
 * choosing among their tenant's newest keys, revoked ones included. All the
 * while a driver creates keys and revokes them: through `ctl` as a process,
 * and through the KeyService in process with the real invalidator on the same
 * Redis prefix.
 *
 * Every response is recorded (key, replica, when it was sent, body) and then
 * judged:
 *   - cross-tenant: a 200 whose body is not the key's own tenant;
 *   - stale: a 200 for a request SENT after that key's revoke had returned;
 *   - error: anything else that is not 200 for a live key, or 401 "Invalid or
 *     revoked API key" once its revoke had begun (a transport error, a 5xx,
 *     a 429, a 401 before the revoke began, …).
 * All three must be 0, and every revoke confirmed.
 *
 * Then one replica gets SIGTERM under the same load: every request already
 * sent to it completes (200 or a clean answer in the envelope, never a reset),
 * and it exits 0. Stricter still: a request sent on an open connection even
 * after the signal gets an answer (503 while draining); only a NEW connection,
 * once the replica no longer listens, may be refused (nothing was sent).
 *
 * The clients deliberately keep using revoked keys, so each far exceeds the
 * failed-authentication allowance (20 per minute); the gateways get a high
 * GATEWAY_AUTH_FAILURE_LIMIT, or that throttle (answering 429 to store
 * lookups, as designed) would be counted as errors here.
 */
import t from 'tap'
import { Client } from 'undici'
import { errorCatalog } from '@scoped/shared/errors'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { KeyOwner } from '@scoped/agency-service/keys/key-service'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import { TenantStore } from '@scoped/agency-service/tenants'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import { runCtl } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'
import { REVOKED, sleep } from './support.js'

const LOAD_SECONDS = Number(process.env['LOAD_SECONDS'] ?? 20)
const CLIENTS = 24
const AGENCIES = 3
const SUB_ACCOUNTS_PER_AGENCY = 3
/** Pause between the in-process driver's revokes. */
const DRIVER_PAUSE_MS = 250
/** How long the load goes on after SIGTERM reached one replica. */
const AFTER_SIGTERM_MS = 1_500

interface Tenant {
  label: string
  scope: 'AGENCY' | 'SUB-ACCOUNT'
  owner: KeyOwner
  path: '/v1/agency' | '/v1/agents'
  agencyId: string
  agencyName: string
  subName: string | null
  keys: KeyRecord[]
}

interface KeyRecord {
  id: string
  key: string
  tenant: Tenant
  /** performance.now() when its creation had returned: no request uses it before. */
  createdAt: number
  revoke?: { via: 'ctl' | 'in-process'; startedAt: number; returnedAt?: number; failed?: string }
}

interface Sample {
  key: KeyRecord
  replica: number
  client: number
  sentAt: number
  doneAt: number
  status: number
  body: string
  error?: string
}

/** Whether a 200's body is the key's own tenant. */
function ownTenant(sample: Sample): boolean {
  const tenant = sample.key.tenant
  let json: { data?: unknown }
  try {
    json = JSON.parse(sample.body) as { data?: unknown }
  } catch {
    return false
  }
  if (tenant.scope === 'AGENCY') {
    const data = json.data as { id?: string; name?: string } | undefined
    return data?.id === tenant.agencyId && data.name === tenant.agencyName
  }
  const data = json.data as { name?: string }[] | undefined
  return Array.isArray(data) && data.length === 1 && data[0]!.name === `agent of ${tenant.subName}`
}

function isRevokedAnswer(sample: Sample): boolean {
  if (sample.status !== 401) return false
  try {
    return (JSON.parse(sample.body) as { message?: string }).message === REVOKED
  } catch {
    return false
  }
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!

t.test(`under load: ${CLIENTS} clients, two replicas, keys revoked and created for ${LOAD_SECONDS} s`, async (t) => {
  const stack = await startStack(t, { replicas: 2, gatewayEnv: { GATEWAY_AUTH_FAILURE_LIMIT: '1000000' } })
  const pool = stack.db.pool
  const invalidator = createKeyInvalidator(
    pool,
    { redisUrl: stack.redis.url, redisKeyPrefix: stack.redis.prefix, keyCacheSecret: readKeyCacheSecret(stack.env) },
    'load-driver',
  )
  t.teardown(() => invalidator.close())
  const service = new KeyService(pool, invalidator)

  // Tenants: 3 agencies, 9 sub-accounts, each sub-account with one agent named after it.
  const store = new TenantStore(pool)
  const tenants: Tenant[] = []
  for (let a = 1; a <= AGENCIES; a++) {
    const agency = await store.createAgency(`Load Agency ${a}`)
    tenants.push({
      label: agency.name,
      scope: 'AGENCY',
      owner: { scope: 'AGENCY', agencyId: agency.id },
      path: '/v1/agency',
      agencyId: agency.id,
      agencyName: agency.name,
      subName: null,
      keys: [],
    })
    for (let s = 1; s <= SUB_ACCOUNTS_PER_AGENCY; s++) {
      const sub = await store.createSubAccount(agency.id, `Load ${a}.${s}`)
      await pool.query(`INSERT INTO agents (sub_account_id, name) VALUES ($1, $2)`, [sub.id, `agent of ${sub.name}`])
      tenants.push({
        label: sub.name,
        scope: 'SUB-ACCOUNT',
        owner: { scope: 'SUB-ACCOUNT', subAccountId: sub.id },
        path: '/v1/agents',
        agencyId: agency.id,
        agencyName: agency.name,
        subName: sub.name,
        keys: [],
      })
    }
  }
  const newKey = async (tenant: Tenant, viaCtl = false): Promise<KeyRecord> => {
    let id: string
    let key: string
    if (viaCtl) {
      const flag = tenant.owner.scope === 'AGENCY' ? ['--agency', tenant.owner.agencyId] : ['--sub-account', tenant.owner.subAccountId]
      const result = await runCtl(['key', 'create', ...flag, '--name', 'load (ctl)'], stack.ctlEnv)
      if (result.status !== 0) throw new Error(`ctl key create failed: ${result.stderr}`)
      ;({ id, key } = result.json as { id: string; key: string })
    } else {
      ;({ id, key } = await service.create(tenant.owner, 'load', 'load-test'))
    }
    const record: KeyRecord = { id, key, tenant, createdAt: performance.now() }
    tenant.keys.push(record)
    return record
  }
  for (const tenant of tenants) for (let i = 0; i < 2; i++) await newKey(tenant)

  // The clients: each its own source address, one keep-alive connection to each replica.
  const samples: Sample[] = []
  const ports = [...stack.gatewayPorts]
  let running = true
  const replicaGone = [false, false]
  let sigtermAt = Infinity
  const clientLoops = Array.from({ length: CLIENTS }, async (_, c) => {
    const tenant = tenants[c % tenants.length]!
    const connections = ports.map(
      (port) =>
        new Client(`https://127.0.0.1:${port}`, {
          connect: { ca: stack.cert, servername: 'localhost' },
          localAddress: `127.0.0.${10 + c}`,
          pipelining: 1,
        }),
    )
    let turn = c % 2
    try {
      while (running) {
        let replica = turn++ % 2
        if (replicaGone[replica]) replica = 1 - replica
        const recent = tenant.keys.slice(-5)
        const live = recent.filter((record) => record.revoke === undefined)
        const key = Math.random() < 0.6 && live.length > 0 ? live[live.length - 1]! : pick(recent)
        const sample: Sample = { key, replica, client: c, sentAt: performance.now(), doneAt: 0, status: 0, body: '' }
        try {
          const response = await connections[replica]!.request({ path: tenant.path, method: 'GET', headers: { authorization: `Bearer ${key.key}` } })
          sample.status = response.statusCode
          sample.body = await response.body.text()
        } catch (error) {
          sample.error = `${(error as { code?: string }).code ?? ''} ${(error as Error).message}`.trim()
          // The replica stopped listening after its SIGTERM: this client goes on with the other one.
          if (sample.sentAt >= sigtermAt) replicaGone[replica] = true
        }
        sample.doneAt = performance.now()
        samples.push(sample)
      }
    } finally {
      await Promise.all(connections.map((connection) => connection.destroy()))
    }
  })

  // The driver: create a key for a tenant, then revoke one of its older keys; in process and through ctl at once.
  const revokes = { ctl: 0, 'in-process': 0 }
  const revokeMs: Record<'ctl' | 'in-process', number[]> = { ctl: [], 'in-process': [] }
  let created = 0
  const loadStart = performance.now()
  const loadEnd = loadStart + LOAD_SECONDS * 1000
  /** Claims a tenant's oldest live key (in use for a while) for revocation, leaving it at least one other. */
  function claim(tenant: Tenant, via: 'ctl' | 'in-process'): KeyRecord | undefined {
    const live = tenant.keys.filter((record) => record.revoke === undefined)
    const victim = live[0]
    if (live.length < 2 || victim === undefined || performance.now() - victim.createdAt < 300) return undefined
    victim.revoke = { via, startedAt: performance.now() }
    return victim
  }
  async function driveInProcess(): Promise<void> {
    while (performance.now() < loadEnd) {
      const tenant = pick(tenants)
      await newKey(tenant)
      created++
      await sleep(50)
      const victim = claim(tenant, 'in-process')
      if (victim !== undefined) {
        try {
          await service.revoke(victim.id, 'load-test')
          victim.revoke!.returnedAt = performance.now()
          revokeMs['in-process'].push(victim.revoke!.returnedAt - victim.revoke!.startedAt)
          revokes['in-process']++
        } catch (error) {
          victim.revoke!.failed = error instanceof Error ? error.message : String(error)
        }
      }
      await sleep(DRIVER_PAUSE_MS)
    }
  }
  async function driveCtl(): Promise<void> {
    // A ctl run is a process start (seconds on this machine, more when it is busy): a round is begun only
    // while the load has time left for one as long as the last, so the load does not outlast LOAD_SECONDS by much.
    let lastRoundMs = 0
    while (performance.now() + lastRoundMs < loadEnd) {
      const roundStart = performance.now()
      const tenant = pick(tenants)
      await newKey(tenant)
      created++
      const victim = claim(tenant, 'ctl')
      if (victim === undefined) {
        await sleep(100)
        continue
      }
      const result = await runCtl(['key', 'revoke', victim.id], stack.ctlEnv)
      if (result.status === 0) {
        victim.revoke!.returnedAt = performance.now()
        revokeMs.ctl.push(victim.revoke!.returnedAt - victim.revoke!.startedAt)
        revokes.ctl++
      } else {
        victim.revoke!.failed = result.stderr.trim()
      }
      lastRoundMs = performance.now() - roundStart
    }
  }
  /** One key is created through `ctl key create` too, at the same time, and used once it is there. */
  async function createThroughCtl(): Promise<void> {
    await newKey(pick(tenants), true)
    created++
  }
  await Promise.all([driveInProcess(), driveCtl(), createThroughCtl()])
  const loadSeconds = (performance.now() - loadStart) / 1000
  const loadSamples = samples.length

  // SIGTERM to replica 2 while the clients go on.
  await sleep(300)
  const terminated = stack.replicas[1]!
  sigtermAt = performance.now()
  const exited = terminated.stop('SIGTERM')
  const exitCode = await exited
  const exitedAfter = Math.round(performance.now() - sigtermAt)
  await sleep(AFTER_SIGTERM_MS)
  running = false
  await Promise.all(clientLoops)

  // Judging every response.
  const crossTenant: Sample[] = []
  const stale: Sample[] = []
  const errors: Sample[] = []
  let afterRevokeReturned = 0
  let duringRevoke = 0
  let ok = 0
  let refused = 0
  const drainAnswers = new Map<string, number>()
  let afterSigtermRefusals = 0
  for (const sample of samples) {
    const revoke = sample.key.revoke
    const terminating = sample.replica === 1 && sample.doneAt >= sigtermAt
    if (terminating && sample.sentAt >= sigtermAt && sample.error?.startsWith('ECONNREFUSED') === true) {
      // A new connection after SIGTERM: the replica stopped listening, and nothing was sent (counted, not an error).
      // A request sent on an open connection, before or after SIGTERM, must get an answer: a reset is an error.
      afterSigtermRefusals++
      continue
    }
    if (sample.error !== undefined) {
      errors.push(sample)
      continue
    }
    if (terminating) drainAnswers.set(String(sample.status), (drainAnswers.get(String(sample.status)) ?? 0) + 1)
    const afterReturn = revoke?.returnedAt !== undefined && sample.sentAt > revoke.returnedAt
    if (afterReturn) afterRevokeReturned++
    else if (revoke !== undefined && sample.doneAt > revoke.startedAt) duringRevoke++
    if (sample.status === 200) {
      ok++
      if (!ownTenant(sample)) crossTenant.push(sample)
      if (afterReturn || (revoke?.failed !== undefined && sample.sentAt > revoke.startedAt + 1_000)) stale.push(sample)
      continue
    }
    if (isRevokedAnswer(sample) && revoke !== undefined && sample.doneAt > revoke.startedAt) {
      refused++
      continue
    }
    // A clean answer of a draining replica (503 in the envelope) is not an error; anything else is.
    if (terminating && sample.status === errorCatalog.serviceUnavailable.status && sample.body.includes(errorCatalog.serviceUnavailable.message)) continue
    errors.push(sample)
  }
  const describe = (list: Sample[]) =>
    list.slice(0, 5).map((s) => ({
      replica: s.replica + 1,
      tenant: s.key.tenant.label,
      key: s.key.id,
      sentAt: Math.round(s.sentAt - loadStart),
      ...(Number.isFinite(sigtermAt) && s.replica === 1 && s.doneAt >= sigtermAt ? { sentAfterSigterm: Math.round(s.sentAt - sigtermAt) } : {}),
      revoke: s.key.revoke && {
        ...s.key.revoke,
        startedAt: Math.round(s.key.revoke.startedAt - loadStart),
        returnedAt: s.key.revoke.returnedAt && Math.round(s.key.revoke.returnedAt - loadStart),
      },
      status: s.status,
      error: s.error,
      body: s.body.slice(0, 200),
    }))
  const failedRevokes = tenants.flatMap((tenant) => tenant.keys).filter((record) => record.revoke?.failed !== undefined)
  const totalRevokes = revokes.ctl + revokes['in-process']

  t.comment(
    `load: ${loadSamples} requests in ${loadSeconds.toFixed(1)} s (${Math.round(loadSamples / loadSeconds)}/s) by ${CLIENTS} clients on 2 replicas; ` +
      `${totalRevokes} revokes (${revokes.ctl} ctl, ${revokes['in-process']} in process), ${created} keys created; ` +
      `${ok} answered 200, ${refused} refused as revoked (${afterRevokeReturned} sent after their revoke returned, ${duringRevoke} during it); ` +
      `cross-tenant ${crossTenant.length}, stale ${stale.length}, errors ${errors.length}`,
  )
  const percentile = (values: number[], p: number) =>
    values.length === 0 ? 0 : Math.round([...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!)
  const latencies = [0, 1].map((replica) => samples.filter((s) => s.replica === replica && s.doneAt < sigtermAt).map((s) => s.doneAt - s.sentAt))
  t.comment(
    `latency ms (p50/p99): replica 1 ${percentile(latencies[0]!, 0.5)}/${percentile(latencies[0]!, 0.99)}, replica 2 ${percentile(latencies[1]!, 0.5)}/${percentile(latencies[1]!, 0.99)}; ` +
      `revoke ms (p50/max): in process ${percentile(revokeMs['in-process'], 0.5)}/${percentile(revokeMs['in-process'], 1)}, ctl ${percentile(revokeMs.ctl, 0.5)}/${percentile(revokeMs.ctl, 1)}`,
  )
  t.comment(
    `SIGTERM: replica 2 exited ${exitCode} after ${exitedAfter} ms; its answers meanwhile ${JSON.stringify(Object.fromEntries(drainAnswers))}; then ${afterSigtermRefusals} connection attempts refused (it no longer listens)`,
  )

  t.ok(loadSamples > CLIENTS * LOAD_SECONDS, `load was applied (${loadSamples} requests)`)
  // Normally several a second; far fewer when the machine is saturated (each waits for acknowledgements or polls).
  t.ok(totalRevokes >= Math.max(2, LOAD_SECONDS / 4), `keys were revoked throughout (${totalRevokes})`)
  t.ok(revokes.ctl >= 1, `some through ctl as a process (${revokes.ctl})`)
  t.ok(afterRevokeReturned > 0, `requests were sent with keys whose revoke had returned (${afterRevokeReturned})`)
  t.same(
    failedRevokes.map((record) => record.revoke),
    [],
    'every revoke was confirmed',
  )
  t.same(describe(crossTenant), [], `0 cross-tenant responses (${crossTenant.length})`)
  t.same(describe(stale), [], `0 stale acceptances (${stale.length})`)
  t.same(describe(errors), [], `0 errors (${errors.length})`)
  t.equal(exitCode, 0, 'the replica that got SIGTERM under load exited 0')
  t.ok((drainAnswers.get('200') ?? 0) + (drainAnswers.get('401') ?? 0) > 0 || exitedAfter < 100, 'requests in flight at SIGTERM were answered')
})
