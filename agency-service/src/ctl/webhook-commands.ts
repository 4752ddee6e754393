/** `ctl webhook list --agency A`: the agency's webhook endpoints, oldest first, as the API's items (never a secret). */
import { isUuid } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { WebhookStore } from '../webhooks/webhook-store.js'
import type { Command } from './command-context.js'
import { required } from './flags.js'

export const webhookCommands: Readonly<Record<string, Command>> = {
  'webhook list': async ({ pool, flags }) => {
    const agencyId = required(flags, 'agency')
    if (!isUuid(agencyId)) throw new ApiError('badRequest', '--agency must be a UUID')
    const { rows } = await pool.query('SELECT 1 FROM agencies WHERE id = $1', [agencyId])
    if (rows.length === 0) throw new ApiError('agencyNotFound')
    return new WebhookStore(pool).all(agencyId)
  },
}
