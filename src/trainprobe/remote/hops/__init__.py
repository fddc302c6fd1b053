"""remote/hops"""
