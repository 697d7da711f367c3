"""The file `kirolearn install` names in hook commands: `<python> <this folder>/kirolearn-hook [EVENT]`.

pip's `kirolearn-hook` console script imports `re` before our code runs (~14M
instructions, a third of a bare interpreter's start, on every hook call); this
file only calls kirolearn.hook.main, flushes stdout and stderr and
leaves with os._exit: the hook has written (os.write, fsync) and closed all it
opened, and the interpreter's teardown of every module would cost another
~10M instructions. It sits alone in its folder,
because Python puts a script's folder first on sys.path: nothing here can
shadow a module. The console script stays, for `--portable` commands and users.
"""
