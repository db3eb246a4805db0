"""``graphctx serve``: answers over HTTP (LitServe), a pool that follows the site, a page to see why."""
