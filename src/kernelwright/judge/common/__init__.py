"""What both sides of the judge share: the typed protocol between its processes (requests,
replies, the wire format), verdicts as plain data, GPU specs, the GPU lock, the judge's private
directory, process hygiene and its environment knobs. Imports nothing else of the judge: the
sandbox may import only this package."""
