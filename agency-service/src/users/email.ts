/** Console users' emails: the one check and spelling for creating a user and for finding one (`ctl user …`). */
import { invalidField } from '@scoped/shared/errors'

const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
const EMAIL_MAX_LENGTH = 254

/** An email address, trimmed and lower-cased as the users table stores it (uniqueness ignores case); anything else is a 400. */
export function requireEmail(value: unknown): string {
  if (typeof value !== 'string') throw invalidField('email', 'must be an email address')
  const email = value.trim().toLowerCase()
  if (!EMAIL_PATTERN.test(email) || email.length > EMAIL_MAX_LENGTH) throw invalidField('email', 'must be an email address')
  return email
}
