/**
 * `ctl usage (--agency A | --sub-account S | --key K) [--from T] [--to T]
 * [--granularity G] [--group-by B]`: the usage report (usage/usage-report.ts)
 * of an agency (its own keys and all its sub-accounts'), a sub-account, or
 * one key; prints the API's `data` object.
 */
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { isUuid } from '@scoped/shared/db'
import type { UsageOwner, UsageQueryText } from '../usage/usage-report.js'
import { readUsageRequest, usageReport } from '../usage/usage-report.js'
import type { Command } from './command-context.js'
import type { Flags } from './flags.js'
import { UsageError } from './flags.js'

async function ownerOf(pool: Pool, flags: Flags): Promise<{ owner: UsageOwner; keyId?: string }> {
  const given = (['agency', 'sub-account', 'key'] as const).filter((flag) => flags[flag] !== undefined)
  if (given.length !== 1) throw new UsageError('give exactly one of --agency, --sub-account and --key')
  const id = flags[given[0]!]!
  if (!isUuid(id)) throw new ApiError('notFound')
  if (given[0] === 'agency') {
    const { rowCount } = await pool.query('SELECT 1 FROM agencies WHERE id = $1', [id])
    if (rowCount === 0) throw new ApiError('notFound')
    return { owner: { agencyId: id } }
  }
  if (given[0] === 'sub-account') {
    const { rows } = await pool.query<{ agency_id: string }>('SELECT agency_id FROM sub_accounts WHERE id = $1', [id])
    if (rows[0] === undefined) throw new ApiError('notFound')
    return { owner: { agencyId: rows[0].agency_id, subAccountId: id } }
  }
  const { rows } = await pool.query<{ agency_id: string; sub_account_id: string | null }>('SELECT agency_id, sub_account_id FROM api_keys WHERE id = $1', [id])
  if (rows[0] === undefined) throw new ApiError('notFound')
  const { agency_id: agencyId, sub_account_id: subAccountId } = rows[0]
  return { owner: subAccountId === null ? { agencyId } : { agencyId, subAccountId }, keyId: id.toLowerCase() }
}

export const usageCommand: Command = async ({ pool, flags }) => {
  const { owner, keyId } = await ownerOf(pool, flags)
  const query: UsageQueryText = {}
  if (flags.from !== undefined) query.from = flags.from
  if (flags.to !== undefined) query.to = flags.to
  if (flags.granularity !== undefined) query.granularity = flags.granularity
  if (flags['group-by'] !== undefined) query.groupBy = flags['group-by']
  if (keyId !== undefined) query.keyId = keyId
  const request = readUsageRequest(query, owner, new Date(), (name) => `--${name === 'groupBy' ? 'group-by' : name}`)
  return usageReport(pool, owner, request)
}
