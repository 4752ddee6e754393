/**
 * `ctl sub-account key-rate-limit S (--rate R --burst B | --clear-rate-limit)`:
 * the sub-account's default rate limit for its new keys (routes/sub-account-store.ts),
 * printed as `{"id","agencyId","name","keyRateLimit"}`.
 */
import { inTransaction, isUuid } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { setKeyRateLimit } from '../routes/sub-account-store.js'
import type { CommandContext } from './command-context.js'
import { RATE_LIMIT_FIELDS, rateLimitOf, UsageError } from './flags.js'

export async function setSubAccountKeyRateLimit({ pool, argument, flags, actor }: CommandContext): Promise<unknown> {
  if (argument === undefined) throw new UsageError('sub-account key-rate-limit needs the sub-account id: sub-account key-rate-limit S --rate R --burst B')
  if (!isUuid(argument)) throw new ApiError('badRequest', 'sub-account id must be a UUID')
  const limit = rateLimitOf(flags, true)
  if (limit === undefined) throw new UsageError('sub-account key-rate-limit needs --rate R --burst B, or --clear-rate-limit')
  const updated = await inTransaction(pool, (client) => setKeyRateLimit(client, { id: argument }, limit, actor, RATE_LIMIT_FIELDS))
  if (updated === undefined) throw new ApiError('subAccountNotFound')
  const { id, agencyId, name, keyRateLimit } = updated
  return { id, agencyId, name, keyRateLimit }
}
