import type { ServiceModule } from '../../server/module.ts';
import { emailSigninRoutes } from './byEmail.ts';

/**
 * Sign-in by e-mail, a platform feature: the page `/signin` where a member asks for a sign-in link and
 * the mail that brings it. The link itself and the session it opens are the kernel's (server/signin.ts:
 * the session credential, `GET /signin/<token>`); operators also make links with `npm run admin -- signin`.
 */
export const signin: ServiceModule<'signin'> = {
  namespace: 'signin',
  handlers: {},
  routes: (deps) => emailSigninRoutes({ ...deps, baseUrl: deps.config.publicUrl }),
};
