/**
 * What the tests of defences that spare the innocent share (flood-of-unknown-keys.test.ts,
 * agency-server-keys.test.ts): HTTPS from a chosen source address to one replica, the replica's
 * store lookups as its own metrics count them, and sub-accounts with an agent each.
 */
import type { Test } from 'tap'
import { Client } from 'undici'
import type { KeyOwner } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import type { Stack } from '../helpers/stack.js'

export interface Answer {
  status: number
  message: string | undefined
}

/** HTTPS from one source address to one replica, on a keep-alive connection. */
export function connect(t: Test, stack: Stack, port: number, localAddress: string): (key: string, headers?: Record<string, string>) => Promise<Answer> {
  const client = new Client(`https://127.0.0.1:${port}`, { connect: { ca: stack.cert, servername: 'localhost' }, localAddress, pipelining: 1 })
  t.teardown(() => client.destroy())
  return async (key, headers = {}) => {
    const response = await client.request({ path: '/v1/agents', method: 'GET', headers: { authorization: `Bearer ${key}`, ...headers } })
    const text = await response.body.text()
    let message: string | undefined
    try {
      message = (JSON.parse(text) as { message?: string }).message
    } catch {
      message = undefined
    }
    return { status: response.statusCode, message }
  }
}

/** The sum of every sample of a metric matching `pattern` (its value in group 1). */
export async function metric(adminPort: number, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text()
  let sum = 0
  for (const match of text.matchAll(pattern)) sum += Number(match[1])
  return sum
}

export interface Lookups {
  /** Postgres round trips less the invalidation log's polls: nothing else reaches Postgres while no issued key is used. */
  postgres: number
  /** Redis key-cache reads. */
  redis: number
  /** Lookups of keys the filter could not vouch for (this replica not current), taken from the unknown-key budget. */
  unsure: number
  /** Of those, refused (503) because the budget was spent. */
  refused: number
}

export async function lookups(adminPort: number): Promise<Lookups> {
  const postgres = await metric(adminPort, /^gateway_store_round_trips_total\{store="postgres"\} (\d+)/gm)
  const polls = await metric(adminPort, /^gateway_invalidation_log_polls_total\{result="[a-z]+"\} (\d+)/gm)
  return {
    postgres: postgres - polls,
    redis: await metric(adminPort, /^gateway_key_cache_lookups_total\{layer="redis",result="[a-z]+"\} (\d+)/gm),
    unsure: await metric(adminPort, /^gateway_unknown_key_lookups_total (\d+)/gm),
    refused: await metric(adminPort, /^gateway_unknown_key_lookups_refused_total (\d+)/gm),
  }
}

export async function subAccounts(stack: Stack, count: number): Promise<KeyOwner[]> {
  const store = new TenantStore(stack.db.pool)
  const agency = await store.createAgency('Innocent Agency')
  const owners: KeyOwner[] = []
  for (let i = 1; i <= count; i++) {
    const sub = await store.createSubAccount(agency.id, `Innocent ${i}`)
    await stack.db.pool.query(`INSERT INTO agents (sub_account_id, name) VALUES ($1, $2)`, [sub.id, `agent ${i}`])
    owners.push({ scope: 'SUB-ACCOUNT', subAccountId: sub.id })
  }
  return owners
}
