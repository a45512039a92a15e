// memwarn-demo: placeholder, filled in by the soak work.
print("memwarn-demo")
