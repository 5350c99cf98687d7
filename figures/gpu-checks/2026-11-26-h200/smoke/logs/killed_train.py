
import os, sys, caopd.train as t
kill_at = int(sys.argv[1])
class KilledAfterSave(t.RunFolderLog):
    def on_save(self, args, state, control, **kwargs):
        if state.global_step == kill_at:
            print(f'[caopd-smoke] killing the run after checkpoint-{kill_at} (os._exit(9))', flush=True); os._exit(9)
t.RunFolderLog = KilledAfterSave
t.main(sys.argv[2:])
