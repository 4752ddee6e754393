/** Small checks of names and ids shared by the CLI and the HTTP handlers. */
import { ApiError } from '@scoped/shared/errors'
import { isUuid } from '@scoped/shared/db'

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/

export function requireName(value: unknown, field: string, maxLength: number): string {
  if (typeof value !== 'string') throw new ApiError('badRequest', `${field} is required`)
  const name = value.trim()
  if (name.length < 1 || name.length > maxLength || CONTROL_CHARACTERS.test(name)) {
    throw new ApiError('badRequest', `${field} must be 1 to ${maxLength} printable characters`)
  }
  return name
}

export function requireUuid(value: unknown, field: string): string {
  if (!isUuid(value)) throw new ApiError('badRequest', `${field} must be a UUID`)
  return value.toLowerCase()
}
