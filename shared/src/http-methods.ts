/**
 * The methods of the public API: what the gateway forwards (any other is
 * refused with 405 before authentication), and what a service names in the
 * `Allow` of its own 405.
 */
export const API_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'] as const
