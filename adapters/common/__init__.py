"""What the adapters share that is neither protocol nor policy: import-time
plumbing (:mod:`.submodules`).  Stdlib only, and nothing imported here, so
that an adapter pays only for the module it uses."""
