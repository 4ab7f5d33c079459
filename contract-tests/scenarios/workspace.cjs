'use strict';
/** Workspace structure: sites and apps of the main key's workspace. */
module.exports = {
  200: {
    'workspace.ListBundles': () => {},
    'workspace.ListApps': () => {},
  },
};
